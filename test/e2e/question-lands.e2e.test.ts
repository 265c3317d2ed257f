// Questions land too, end to end against a REAL Gitea 1.26.3: the real service process, the
// real Codex app-server driven by the scripted model, the real gitea-mcp. When the agent ends its turn
// asking the user something, the task waits only once the question is on Gitea, verified like an
// answer (read back with the turn's marker): here the agent asks without posting its question, so the
// one retry turn posts it, or — when the agent does not post it then either — the REST fallback posts
// the question's text. The thread is read the moment the task is `waiting_user`. While the question is
// verified the task is `verifying_reply` (the task machine's `asking`), so a kill -9 then resumes the
// verification after the restart instead of using up the task's one execution retry.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';
import { scriptedAgent } from '../../src/demo/scripted-agent.js';
import { startServiceProcess, type ServiceProcess } from '../support/sandbox/service-process.js';
import { waitForTaskState } from '../support/wait-for-task.js';

const root = mkdtempSync(join(tmpdir(), 'ccweb-question-e2e-'));
let env: RealServiceEnvironment;
let service: ServiceProcess;
const TERMINAL = ['succeeded', 'failed', 'failed_reply', 'succeeded_with_rest_fallback', 'cancelled', 'aborted', 'rejected'];

interface TaskDetail {
  task: { taskId: string; state: string; errorCode: string | null; attempt: number };
  turns: Array<{ turnKey: string; kind: string; status: string }>;
  comments: Array<{ commentKey: string; kind: string; commentId: number | null; status: string }>;
  audit: Array<{ action: string; fromState: string | null; toState: string | null }>;
}

async function api<T>(path: string): Promise<T> {
  const res = await fetch(`${service.url}/api/gitea-workflow${path}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
  if (!res.ok) throw new Error(`${path}: ${res.status}`);
  return (await res.json()) as T;
}

const waitForTask = (taskId: string, states: string[]) => waitForTaskState((path) => api<TaskDetail>(path), taskId, states, 120_000);

/** `alice` mentions the bot on a new issue; resolves with the issue and the task the service queued. */
async function ask(title: string, body: string): Promise<{ issue: number; taskId: string }> {
  const issue = await env.gitea.createIssue('alice', title);
  const c = await env.gitea.comment('alice', issue, body);
  const commentIdOf = (payload: string) => (JSON.parse(payload) as { comment?: { id?: number } }).comment?.id;
  const delivery = await env.gitea.waitForDelivery(env.hookId, (d) => commentIdOf(d.payload) === c.id, 30_000);
  expect(delivery.status).toBe(202);
  return { issue, taskId: String((JSON.parse(delivery.responseBody) as { taskId: string }).taskId) };
}

const botCommentsOf = async (issue: number, taskId: string) =>
  (await env.gitea.comments(issue)).filter((c) => c.user.login === 'ccweb-bot' && c.body.includes(`taskId=${taskId}`) && !c.body.includes('已收到'));

beforeAll(async () => {
  env = await startRealServiceEnvironment(root);
  service = await startServiceProcess(env.env);
}, 600_000);

/** Pauses (SIGSTOP) or resumes (SIGCONT) the real Gitea's process group: its answers stop, nothing else changes. */
function pauseGitea(signal: 'SIGSTOP' | 'SIGCONT'): void {
  process.kill(-env.gitea.gitea.pid, signal);
}

afterAll(async () => {
  if (env) pauseGitea('SIGCONT');
  await service?.stop().catch(() => undefined);
  await env?.close();
  rmSync(root, { recursive: true, force: true });
});

describe('a question lands on Gitea before the task waits [real gitea-mcp]', () => {
  it('the agent asks without posting: the retry turn posts the question, then the task waits (once)', async () => {
    const { issue, taskId } = await ask('Stabilise login', '@ccweb-bot I have a question (forget): can you make the login test stable?');
    const d = await waitForTask(taskId, ['waiting_user', ...TERMINAL]);
    expect(d.task.state).toBe('waiting_user');
    // On Gitea already, as the agent's own comment (its retry turn), with the turn's marker.
    const asked = await botCommentsOf(issue, taskId);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.body).toContain('Which browser does the flaky login test fail in?');
    expect(asked[0]!.body).not.toContain('CCWEB_WAITING_USER');
    expect(d.turns.map((t) => t.kind)).toEqual(['normal', 'reply_retry']);
    expect(d.comments.find((c) => c.kind === 'mcp_final' || c.kind === 'rest_fallback')).toMatchObject({ kind: 'mcp_final', status: 'confirmed', commentId: asked[0]!.id });
    // The question went through verification like an answer (its retry turn through retry_wait → running),
    // and the task waited once, from verifying_reply, never through a reply's succeeded states.
    const task = d.audit.filter((a) => a.action === 'task.transition');
    expect(task.filter((a) => a.toState === 'waiting_user').map((a) => a.fromState)).toEqual(['verifying_reply']);
    expect(task.map((a) => `${a.fromState}>${a.toState}`).slice(-6)).toEqual([
      'preparing>running', 'running>verifying_reply', 'verifying_reply>retry_wait', 'retry_wait>running', 'running>verifying_reply', 'verifying_reply>waiting_user',
    ]);
    expect(d.task.attempt).toBe(0);
  });

  it('kill -9 while the question is being verified (its retry turn in flight): after the restart the question is verified again, not asked again, and lands once', async () => {
    const { issue, taskId } = await ask('Stabilise logout', '@ccweb-bot I have a question (forget, retry-stall-once): can you make the logout test stable?');
    const deadline = Date.now() + 60_000; // the retry turn is in flight once Codex asked the model with its prompt
    const retryAsked = () => env.model.responsesBodies().some((b) => JSON.stringify(b).includes('Your question to the user did not appear') && JSON.stringify(b).includes(`taskId=${taskId}`));
    while (!retryAsked() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(retryAsked()).toBe(true);
    await service.kill9();
    service = await startServiceProcess(env.env);
    const d = await waitForTask(taskId, ['waiting_user', ...TERMINAL]);
    expect(d.task.state).toBe('waiting_user');
    const asked = await botCommentsOf(issue, taskId);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.body).toContain('Which browser does the flaky login test fail in?');
    // One normal turn (the question is never asked again). The retry turn runs in `running`, so the
    // restart interrupted the task there (as an answer's retry turn would be); its one reply retry used,
    // the REST fallback posts the question.
    expect(d.turns.filter((t) => t.kind === 'normal')).toHaveLength(1);
    expect(JSON.stringify(d.audit)).toContain('interrupted_by_restart');
  }, 240_000);

  it('kill -9 while the question is read back from Gitea (verifying_reply, not running): after the restart the verification resumes — no second execution attempt, the question lands once, the task waits', async () => {
    // The REAL Gitea is paused (SIGSTOP) the moment the agent's turn ends asking its question, so the
    // verifier's read-back of the question cannot be answered: the task is held in verifying_reply with
    // the read in flight, and the service is killed there. Gitea is resumed before the service restarts.
    const agent = scriptedAgent();
    let frozenTask: string | null = null;
    env.model.setResponder((body) => {
      const step = agent(body);
      const text = JSON.stringify(body);
      if (frozenTask === null && text.includes('verify-frozen') && !text.includes('did not appear as a comment') && step.type === 'message' && step.text.includes('CCWEB_WAITING_USER')) {
        frozenTask = /taskId=([^\s"\\]+)/.exec(text)?.[1] ?? '';
        pauseGitea('SIGSTOP');
      }
      return step;
    });
    // Not `ask()`: it reads the delivery back from Gitea, which may already be paused when it would.
    const issue = await env.gitea.createIssue('alice', 'Stabilise checkout');
    await env.gitea.comment('alice', issue, '@ccweb-bot I have a question (forget, verify-frozen): can you make the checkout test stable?');
    const deadline = Date.now() + 120_000;
    while (frozenTask === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(frozenTask).not.toBeNull();
    const taskId: string = frozenTask!;
    let during: TaskDetail;
    try {
      during = await waitForTask(taskId, ['verifying_reply', 'waiting_user', ...TERMINAL]);
      // The task shows what it does: its question is being verified (it is not `running`).
      expect(during.task.state).toBe('verifying_reply');
      await service.kill9();
    } finally {
      pauseGitea('SIGCONT');
    }
    expect(during.turns.map((t) => t.kind)).toEqual(['normal']);
    service = await startServiceProcess(env.env);
    const d = await waitForTask(taskId, ['waiting_user', ...TERMINAL]);
    expect(d.task.state).toBe('waiting_user');
    // Resumed, not interrupted: the one execution retry is untouched and the instruction never ran again.
    expect(d.task.attempt).toBe(0);
    expect(JSON.stringify(d.audit)).not.toContain('interrupted_by_restart');
    expect(d.turns.map((t) => t.kind)).toEqual(['normal', 'reply_retry']);
    const task = d.audit.filter((a) => a.action === 'task.transition');
    expect(task.filter((a) => a.toState === 'running' || a.toState === 'preparing').map((a) => a.toState)).toEqual(['preparing', 'running', 'running']);
    expect(task.filter((a) => a.toState === 'waiting_user').map((a) => a.fromState)).toEqual(['verifying_reply']);
    const asked = await botCommentsOf(issue, taskId);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.body).toContain('Which browser does the flaky login test fail in?');
  }, 240_000);

  it('the agent never posts it: the REST fallback posts the question text, then the task waits; the user\'s answer resumes it', async () => {
    const { issue, taskId } = await ask('Stabilise signup', '@ccweb-bot I have a question (forget-always): can you make the signup test stable?');
    const d = await waitForTask(taskId, ['waiting_user', ...TERMINAL]);
    expect(d.task.state).toBe('waiting_user');
    const asked = await botCommentsOf(issue, taskId);
    expect(asked).toHaveLength(1);
    // The question, not the final message's waiting line meant for the service.
    expect(asked[0]!.body).toContain('Which browser does the flaky login test fail in?');
    expect(asked[0]!.body).not.toContain('CCWEB_WAITING_USER');
    expect(d.turns.map((t) => t.kind)).toEqual(['normal', 'reply_retry']);
    expect(d.comments.find((c) => c.kind === 'rest_fallback')).toMatchObject({ status: 'confirmed', commentId: asked[0]!.id });
    // The user answers the question on the issue: the task is queued again and resumes.
    await env.gitea.comment('alice', issue, '@ccweb-bot it fails in Firefox only');
    const done = await waitForTask(taskId, TERMINAL);
    expect(['succeeded', 'succeeded_with_rest_fallback']).toContain(done.task.state);
  });
});
