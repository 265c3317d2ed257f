import { describe, expect, it } from 'vitest';
import { TASK_STATES, taskMachine } from '../../machines/task-lifecycle.js';

// Spec §5.6, written out from the table itself (not from the machine), plus the pairs beyond it:
// verifying_reply → succeeded_with_rest_fallback (the REST fallback of §5.4.4), and change delivery
// (issue 14): running → publishing, publishing → verifying_reply | failed; and a stop reaches every
// non-terminal state (issue 29): retry_wait → cancelled, preparing | publishing | verifying_reply → aborting.
const TABLE: Record<string, string[]> = {
  received: ['queued', 'ignored', 'duplicate', 'rejected'],
  queued: ['preparing', 'cancelled'],
  preparing: ['running', 'blocked_workspace', 'retry_wait', 'aborting', 'failed'],
  running: ['waiting_user', 'verifying_reply', 'publishing', 'retry_wait', 'aborting', 'failed'],
  publishing: ['verifying_reply', 'aborting', 'failed'],
  waiting_user: ['queued', 'cancelled', 'failed'],
  verifying_reply: ['succeeded', 'retry_wait', 'failed_reply', 'succeeded_with_rest_fallback', 'aborting'],
  retry_wait: ['preparing', 'running', 'verifying_reply', 'failed', 'cancelled'],
  blocked_workspace: ['queued', 'cancelled'],
  aborting: ['aborted', 'failed'],
  succeeded: [],
  succeeded_with_rest_fallback: [],
  failed: [],
  failed_reply: [],
  cancelled: [],
  aborted: [],
  ignored: [],
  duplicate: [],
  rejected: [],
};

function tablePairs(): Set<string> {
  const pairs = new Set<string>();
  for (const [from, tos] of Object.entries(TABLE)) for (const to of tos) pairs.add(`${from} -> ${to}`);
  return pairs;
}

function machinePairs(): Set<string> {
  const pairs = new Set<string>();
  for (const node of Object.values(taskMachine.root.states)) {
    for (const transitions of node.transitions.values()) {
      for (const t of transitions) {
        // A targetless transition would stay in the same state: that is a pair too, and must not exist.
        const targets = t.target ?? [node];
        for (const target of targets) pairs.add(`${node.key} -> ${target.key}`);
      }
    }
    expect(node.always ?? []).toHaveLength(0);
    expect(node.after).toHaveLength(0);
    expect(node.invoke).toHaveLength(0);
  }
  return pairs;
}

describe('task lifecycle vs spec §5.6', () => {
  it('has exactly the states of the table (plus publishing), terminals final', () => {
    // The issue counts 19 but lists 18 names; the table's state column lists the same 18, and change
    // delivery adds `publishing`.
    expect(Object.keys(taskMachine.root.states).sort()).toEqual([...TASK_STATES].sort());
    expect(Object.keys(TABLE).sort()).toEqual([...TASK_STATES].sort());
    for (const [state, tos] of Object.entries(TABLE)) {
      const node = taskMachine.root.states[state]!;
      expect(node.type === 'final', state).toBe(tos.length === 0);
    }
  });

  it('can take exactly the (from, to) pairs of the table', () => {
    const expected = tablePairs();
    const actual = machinePairs();
    expect([...actual].filter((p) => !expected.has(p)), 'pairs beyond the table').toEqual([]);
    expect([...expected].filter((p) => !actual.has(p)), 'pairs of the table the machine lacks').toEqual([]);
  });
});
