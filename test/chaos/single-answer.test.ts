// Found by the chaos run, reproduced without any kill: "at most one answer per task" when the agent
// forgets to post and the reply-retry turn re-posts. The retry turn's prompt carries two markers —
// the first turn's (from `replyRetryPrompt`, which verification then looks for) and the retry turn's
// own (appended by `turnInputText` and in the developer instructions). An agent that follows the last
// instruction posts with the retry turn's marker; verification does not recognise it, posts the REST
// fallback, and the issue ends up with two answers.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isTerminalTaskState } from '../../machines/task-lifecycle.js';
import { loadConfig } from '../../src/config/index.js';
import { parseMarkers } from '../../src/domain/marker.js';
import { startService, type Service } from '../../src/service/create-service.js';
import { startRealServiceEnvironment, type RealServiceEnvironment } from '../support/real-gitea/service-environment.js';

describe('one answer per task when the reply-retry turn re-posts [real gitea-mcp]', () => {
  const root = mkdtempSync(join(tmpdir(), 'ccweb-one-answer-'));
  let env: RealServiceEnvironment | null = null;
  let service: Service | null = null;

  afterAll(async () => {
    await service?.close();
    await env?.close();
    rmSync(root, { recursive: true, force: true });
  });

  // Against a real Gitea 1.26; the first run on a machine builds it.
  it('a forgotten reply re-posted by the retry turn is recognised: no REST fallback, one answer', { timeout: 600_000 }, async () => {
    env = await startRealServiceEnvironment(root);
    const config = loadConfig({ env: { ...env.env, CCWEB_LOG_LEVEL: 'silent' } });
    service = await startService({ config, codexEnv: { CODEX_HOME: env.codexHome }, retryDelayMs: 500 });
    expect(`${service.url}${config.webhookPath}`).toBe(env.webhookUrl); // where the Gitea webhook points

    const c = await env.gitea.comment('alice', env.gitea.issueNumber, '@ccweb-bot forget to post at first, then answer');
    const delivery = await env.gitea.waitForDelivery(env.hookId, (d) => (JSON.parse(d.payload) as { comment: { id: number } }).comment.id === c.id);
    expect(delivery.status).toBe(202);
    const taskId = (JSON.parse(delivery.responseBody) as { taskId: string }).taskId;

    let state = '';
    for (const deadline = Date.now() + 90_000; Date.now() < deadline; ) {
      const res = await fetch(`${service.url}/api/gitea-workflow/tasks/${taskId}`, { headers: { Authorization: `Bearer ${env.adminToken}` } });
      state = ((await res.json()) as { task: { state: string } }).task.state;
      if (isTerminalTaskState(state)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const answers = (await env.gitea.comments(env.gitea.issueNumber))
      .filter((x) => x.user.login === env!.gitea.users.bot.login)
      .filter((x) => parseMarkers(x.body).some((m) => m.taskId === taskId));
    expect({ state, answers: answers.length }).toEqual({ state: 'succeeded', answers: 1 });
  });
});
