import {
  assign,
  createActor,
  fromPromise,
  setup,
  toPromise,
  type AnyEventObject,
  type AnyStateMachine,
  type InspectionEvent,
} from 'xstate';
import { describe, expect, it } from 'vitest';

import {
  REPLY_VERIFIER_EVENT_CASES,
  replyVerifierMachine,
  serializeReplyVerifierForGraph,
} from '../../machines/reply-verifier.js';
import { REPO_LOCK_EVENT_CASES, repoLockMachine, serializeRepoLockForGraph } from '../../machines/repo-lock.js';
import { SESSION_EVENT_CASES, serializeSessionForGraph, sessionMachine } from '../../machines/session.js';
import {
  coverageFromMicrosteps,
  createCoverageInspector,
  enumerateEdges,
  formatCoverage,
  generateCoveringPaths,
  replayPathPurely,
  type GenerateOptions,
} from '../support/model-paths.js';

/** Replays every path purely and returns the union of edges taken (asserting each step). */
function replayAll<M extends AnyStateMachine>(machine: M, options: GenerateOptions<M>) {
  const plan = generateCoveringPaths(machine, options);
  const covered = new Set<string>();
  for (const path of plan.paths) {
    const result = replayPathPurely(machine, path, options.input);
    expect(result.mismatches, path.description).toEqual([]);
    for (const step of path.steps) expect(step.edgeId, `${path.description}: ${step.event.type}`).not.toBe('');
    result.covered.forEach((id) => covered.add(id));
  }
  return { plan, covered };
}

const machines = [
  {
    name: 'repoLock',
    machine: repoLockMachine,
    options: {
      events: REPO_LOCK_EVENT_CASES,
      serialize: serializeRepoLockForGraph,
      input: { repoKey: 'default:acme/widget' },
    } as GenerateOptions<AnyStateMachine>,
    edges: 5,
  },
  {
    name: 'session',
    machine: sessionMachine,
    options: {
      events: SESSION_EVENT_CASES,
      serialize: serializeSessionForGraph,
      input: { sessionKey: 'default:acme/widget:issue:42' },
    } as GenerateOptions<AnyStateMachine>,
    edges: 22,
  },
  {
    name: 'replyVerifier',
    machine: replyVerifierMachine,
    options: {
      events: REPLY_VERIFIER_EVENT_CASES,
      serialize: serializeReplyVerifierForGraph,
      input: {
        taskId: 'gitea-task-1',
        turnKey: 'turn-1',
        resourceKey: 'default:acme/widget:issue:42',
        marker: '<!-- ccweb:gitea-task-1:turn-1 -->',
        botLogin: 'ccweb-bot',
        turnStartedAt: 1_700_000_000_000,
      },
    } as GenerateOptions<AnyStateMachine>,
    edges: 11,
  },
];

describe('model paths over the project machines', () => {
  for (const { name, machine, options, edges } of machines) {
    it(`covers every edge of ${name} when replayed purely`, () => {
      const { plan, covered } = replayAll(machine as AnyStateMachine, options);
      const all = enumerateEdges(machine as AnyStateMachine).map((e) => e.id);
      expect(all).toHaveLength(edges);
      expect(plan.uncovered).toEqual([]);
      expect([...covered].sort()).toEqual([...all].sort());
      expect(formatCoverage(name, covered, all)).toBe(`transitions covered: ${edges}/${edges} (${name})`);
    });
  }

  it('names the reply verifier invoke edges by invoke id and guard branch', () => {
    const ids = enumerateEdges(replyVerifierMachine).map((e) => e.id);
    expect(ids).toContain('replyVerifier.querying|xstate.done.actor.queryReply|0');
    expect(ids).toContain('replyVerifier.querying|xstate.done.actor.queryReply|2');
    expect(ids).toContain('replyVerifier.querying|xstate.error.actor.queryReply|0');
    expect(ids).toContain('replyVerifier.fallback_checking|xstate.done.actor.checkFallback|1');
    const found = enumerateEdges(replyVerifierMachine).find((e) => e.id.endsWith('queryReply|1'));
    expect(found).toMatchObject({ kind: 'done', guard: 'canRetryReplyTurn', targets: ['replyVerifier.awaiting_retry_turn'] });
  });
});

// A toy machine: a guarded event, a guarded `always`, an invoke with a guarded done edge and an error edge.
const toyMachine = setup({
  types: {
    context: {} as { n: number },
    events: {} as { type: 'INC' } | { type: 'GO' },
  },
  actors: {
    work: fromPromise<{ ok: boolean }>(async () => ({ ok: true })),
  },
  guards: {
    isBig: ({ context }) => context.n >= 2,
    isOdd: ({ context }) => context.n % 2 === 1,
  },
}).createMachine({
  id: 'toy',
  context: { n: 0 },
  initial: 'counting',
  states: {
    counting: {
      on: {
        INC: { actions: assign({ n: ({ context }) => Math.min(context.n + 1, 3) }) },
        GO: [{ guard: 'isBig', target: 'working' }, { target: 'check' }],
      },
    },
    check: {
      always: [{ guard: 'isOdd', target: 'working' }, { target: 'counting' }],
    },
    working: {
      invoke: {
        id: 'work',
        src: 'work',
        onDone: [{ guard: ({ event }) => event.output?.ok === true, target: 'done' }, { target: 'counting' }],
        onError: { target: 'counting' },
      },
    },
    done: { type: 'final' },
  },
});

const TOY_EDGES = [
  'toy.counting|INC|0',
  'toy.counting|GO|0',
  'toy.counting|GO|1',
  'toy.check|always|0',
  'toy.check|always|1',
  'toy.working|xstate.done.actor.work|0',
  'toy.working|xstate.done.actor.work|1',
  'toy.working|xstate.error.actor.work|0',
];

const toyEvents = (): AnyEventObject[] => [
  { type: 'INC' },
  { type: 'GO' },
  { type: 'xstate.done.actor.work', output: { ok: true } },
  { type: 'xstate.done.actor.work', output: { ok: false } },
  { type: 'xstate.error.actor.work', error: { message: 'boom' } },
];

describe('model paths over a toy machine', () => {
  it('enumerates guard branches, always edges and invoke done/error edges', () => {
    const edges = enumerateEdges(toyMachine);
    expect(edges.map((e) => e.id).sort()).toEqual([...TOY_EDGES].sort());
    expect(edges.find((e) => e.id === 'toy.check|always|0')).toMatchObject({ kind: 'always', guard: 'isOdd' });
    expect(edges.find((e) => e.id === 'toy.working|xstate.error.actor.work|0')).toMatchObject({ kind: 'error' });
  });

  it('covers both sides of every guard and the invoke done/error edges', () => {
    const { plan, covered } = replayAll(toyMachine, {
      events: toyEvents,
      serialize: (s) => (s.context as { n: number }).n,
    });
    expect(plan.uncovered).toEqual([]);
    expect([...covered].sort()).toEqual([...TOY_EDGES].sort());
    // `always` edges are recorded on the step whose event led into `check`.
    const goSteps = plan.paths.flatMap((p) => p.steps).filter((s) => s.event.type === 'GO' && s.edgeId === 'toy.counting|GO|1');
    expect(goSteps.some((s) => s.edgeIds.includes('toy.check|always|0'))).toBe(true);
    expect(goSteps.some((s) => s.edgeIds.includes('toy.check|always|1'))).toBe(true);
    expect(formatCoverage('toy', covered, TOY_EDGES)).toBe('transitions covered: 8/8 (toy)');
  });

  it('synthesizes done/error events for invokes and reports edges their samples cannot reach', () => {
    const plan = generateCoveringPaths(toyMachine, {
      events: () => [{ type: 'INC' }, { type: 'GO' }],
      serialize: (s) => (s.context as { n: number }).n,
    });
    // The synthesized done event has no output: only the `ok: false` branch is reachable.
    expect(plan.uncovered).toEqual(['toy.working|xstate.done.actor.work|0']);
    expect(plan.covered).toContain('toy.working|xstate.error.actor.work|0');
  });

  it('fails loudly when the serialization keeps unbounded context', () => {
    const unbounded = setup({ types: { context: {} as { n: number }, events: {} as { type: 'INC' } } }).createMachine({
      id: 'unbounded',
      context: { n: 0 },
      on: { INC: { actions: assign({ n: ({ context }) => context.n + 1 }) } },
    });
    expect(() =>
      generateCoveringPaths(unbounded, {
        events: () => [{ type: 'INC' }],
        serialize: (s) => s.context,
        maxVertices: 50,
      }),
    ).toThrow(/more than 50 states/);
  });

  it('measures coverage from the inspection stream of a live actor, also for a provided machine', async () => {
    const provided = toyMachine.provide({ actors: { work: fromPromise<{ ok: boolean }>(async () => ({ ok: true })) } });
    const inspector = createCoverageInspector('toy');
    const events: InspectionEvent[] = [];
    const actor = createActor(provided, {
      inspect: (ev) => {
        inspector.inspect(ev);
        events.push(ev);
      },
    });
    actor.start();
    actor.send({ type: 'INC' });
    actor.send({ type: 'GO' }); // n = 1: GO|1 → check → always|0 → working
    await toPromise(actor);
    const expected = ['toy.counting|INC|0', 'toy.counting|GO|1', 'toy.check|always|0', 'toy.working|xstate.done.actor.work|0'];
    expect([...inspector.covered].sort()).toEqual([...expected].sort());
    expect([...coverageFromMicrosteps(events, 'toy')].sort()).toEqual([...expected].sort());
    expect(formatCoverage('toy', inspector.covered, enumerateEdges(toyMachine))).toBe('transitions covered: 4/8 (toy)');
  });
});
