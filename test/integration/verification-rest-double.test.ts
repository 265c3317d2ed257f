// The fault switch the verification tests rely on, checked on its own: "accepts but loses" per call.
// (Checks a fault switch of the Gitea stand-in; real Gitea has no such fault.)
import { afterEach, beforeEach, expect, it } from 'vitest';
import { OWNER, REPO, TOKEN, startGitea, type GiteaFixture } from '../support/verification-world.js';

let gitea: GiteaFixture;
beforeEach(async () => {
  gitea = await startGitea([1]);
});
afterEach(() => gitea.close());

async function post(body: string) {
  const res = await fetch(`${gitea.server.url}/api/v1/repos/${OWNER}/${REPO}/issues/1/comments`, {
    method: 'POST',
    headers: { Authorization: `token ${TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ body }),
  });
  return { status: res.status, json: (await res.json()) as { id: number; body: string } };
}

it('loseCreatedComments(n) answers 201 for the next n comments without storing them, then stores again', async () => {
  gitea.double.faults.loseCreatedComments(2);
  const a = await post('one');
  const b = await post('two');
  const c = await post('three');
  expect([a.status, b.status, c.status]).toEqual([201, 201, 201]);
  expect(a.json.body).toBe('one');
  expect(gitea.comments(1).map((x) => x.body)).toEqual(['three']);
  expect(new Set([a.json.id, b.json.id, c.json.id]).size).toBe(3);
});

it('loseCreatedComments(true) loses every comment until switched off', async () => {
  gitea.double.faults.loseCreatedComments(true);
  await post('one');
  await post('two');
  gitea.double.faults.loseCreatedComments(false);
  await post('three');
  expect(gitea.comments(1).map((x) => x.body)).toEqual(['three']);
});
