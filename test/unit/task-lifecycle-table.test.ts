import { describe, expect, it } from 'vitest';
import { TASK_STATES, taskMachine, taskStatesWith, TERMINAL_TASK_STATES, type TaskStateRole } from '../../machines/task-lifecycle.js';

// Spec §5.6, written out from the table itself (not from the machine), plus the pairs beyond it:
// verifying_reply → succeeded_with_rest_fallback (the REST fallback of §5.4.4), and change delivery
// (issue 14): running → publishing, publishing → verifying_reply | failed; and a stop reaches every
// non-terminal state (issue 29): retry_wait → cancelled, preparing | publishing | verifying_reply → aborting;
// and a question verified like an answer (issue 30): the table's running → waiting_user becomes
// running → verifying_reply → waiting_user (the task waits only once its question is on Gitea).
const TABLE: Record<string, string[]> = {
  received: ['queued', 'ignored', 'duplicate', 'rejected'],
  queued: ['preparing', 'cancelled'],
  preparing: ['running', 'blocked_workspace', 'retry_wait', 'aborting', 'failed'],
  running: ['verifying_reply', 'publishing', 'retry_wait', 'aborting', 'failed'],
  publishing: ['verifying_reply', 'aborting', 'failed'],
  waiting_user: ['queued', 'cancelled', 'failed'],
  verifying_reply: ['succeeded', 'retry_wait', 'failed_reply', 'succeeded_with_rest_fallback', 'aborting', 'waiting_user'],
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
    // An invoked effect reports by event: no onDone or onError transition of its own.
    expect([...node.transitions.keys()].filter((type) => type.startsWith("xstate."))).toEqual([]);
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

// What each state means to the parts around the machine, written out by hand: the executor drives and
// the lease covers every state with work in flight, `aborting` included (the lease is released only once
// the work stopped); the scheduler claims from queued and retry_wait and resumes publishing and
// verifying_reply after a restart; a stop cancels what has nothing in flight and aborts the rest
// (issue 29). Aborting is where the work in flight is being stopped; under a provider hold only a
// verification goes on (it needs Gitea, not the model); a receipt shows a turn's progress while it
// runs, says a blocked task is paused for an operator, and tells every ending without an answer
// (failed, failed_reply, cancelled, aborted) in a failure receipt, except a task stopped by its own
// limits, which ends failed and is told by an edit of its receipt; a rejected task's receipt says why it
// was refused.
const ROLES: Record<TaskStateRole, string[]> = {
  holdsLease: ['preparing', 'running', 'publishing', 'verifying_reply', 'aborting'],
  claimable: ['queued', 'retry_wait'],
  resumable: ['publishing', 'verifying_reply'],
  cancelledByStop: ['queued', 'waiting_user', 'retry_wait', 'blocked_workspace'],
  abortedByStop: ['preparing', 'running', 'publishing', 'verifying_reply'],
  stopping: ['aborting'],
  goesOnUnderHold: ['verifying_reply'],
  showsProgress: ['running'],
  pausedForOperator: ['blocked_workspace'],
  failureReceipt: ['failed', 'failed_reply', 'cancelled', 'aborted'],
  stoppedByLimit: ['failed'],
  refused: ['rejected'],
};

describe('task state roles (declared once, as tags on the machine)', () => {
  it.each(Object.entries(ROLES))('%s: exactly the states written out here', (role, states) => {
    expect(taskStatesWith(role as TaskStateRole).sort()).toEqual([...states].sort());
  });

  it('a stop reaches every non-terminal state but received (transient) and aborting (already stopping), each one way', () => {
    const reached = [...taskStatesWith('cancelledByStop'), ...taskStatesWith('abortedByStop')];
    expect(new Set(reached).size).toBe(reached.length);
    const open = TASK_STATES.filter((s) => !TERMINAL_TASK_STATES.includes(s) && s !== 'received' && s !== 'aborting');
    expect(reached.sort()).toEqual([...open].sort());
    // The machine agrees: each such state takes CANCEL and ABORT to where its tag says.
    for (const s of reached) {
      const to = taskStatesWith('cancelledByStop').includes(s as never) ? 'cancelled' : 'aborting';
      for (const type of ['CANCEL', 'ABORT']) {
        const targets = [...(taskMachine.root.states[s]!.transitions.get(type) ?? [])].flatMap((t) => (t.target ?? []).map((n) => n.key));
        expect(targets, `${s} ${type}`).toEqual([to]);
      }
    }
  });
});
