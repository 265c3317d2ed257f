// Which notifications of a turn say what the agent is doing (the order of a turn's
// notifications is in ../codex FACTS: item/started precedes an item's work, turn/plan/updated
// carries the whole plan each time). Pure: a notification in, a step (or null) out.
import { plainName, type AgentStep } from '../domain/agent-step.js';

interface Notification {
  method: string;
  params?: any;
}

/** The program a shell command runs: `bash -lc 'npm test'` → `npm`, `/usr/bin/git status` → `git`. */
export function programOf(command: unknown): string | null {
  if (typeof command !== 'string') return null;
  let words = command.trim().split(/\s+/);
  // Codex wraps commands in a login shell; the program is the first word of the script.
  if (words.length >= 3 && /(^|\/)(ba|z|)sh$/.test(words[0]!) && /^-\w*c$/.test(words[1]!)) {
    words = words.slice(2).join(' ').replace(/^['"]/, '').trim().split(/\s+/);
  }
  const first = words.find((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w)); // skip FOO=bar assignments
  return plainName(first?.split('/').at(-1));
}

export function agentStepOf(n: Notification): AgentStep | null {
  if (n.method === 'turn/plan/updated') {
    const plan: unknown[] = Array.isArray(n.params?.plan) ? n.params.plan : [];
    if (plan.length === 0) return null;
    const done = plan.filter((s) => (s as { status?: unknown })?.status === 'completed').length;
    return { kind: 'plan', done, total: plan.length };
  }
  if (n.method !== 'item/started') return null;
  const item = n.params?.item as { type?: string; [k: string]: unknown } | undefined;
  switch (item?.type) {
    case 'commandExecution':
      return { kind: 'command', program: programOf(item['command']) };
    case 'mcpToolCall': {
      const server = plainName(item['server']);
      const tool = plainName(item['tool']);
      return { kind: 'tool', name: server && tool ? `${server}.${tool}` : tool };
    }
    case 'dynamicToolCall':
      return { kind: 'tool', name: plainName(item['tool']) };
    case 'fileChange':
      return { kind: 'file_change', files: Array.isArray(item['changes']) ? item['changes'].length : 0 };
    case 'webSearch':
      return { kind: 'web_search' };
    case 'reasoning':
      return { kind: 'thinking' };
    default:
      return null;
  }
}
