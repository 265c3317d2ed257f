/**
 * Reply verifier: one actor per task turn whose final reply must be confirmed on Gitea
 * (architecture §5.4).
 *
 * 1. Query the resource's comments for the bot's reply carrying the task/turn marker.
 * 2. Found → `confirmed`. Explicitly missing → at most one `reply_retry` turn on the same thread
 *    (asked for by the invoked `retryTurn`, which reports how it went as an event), then query again. Still missing → one REST fallback comment with the same
 *    marker (idempotent by marker), then query again to confirm it.
 * 3. A failed or unknown query never writes anything: it ends in `failed` (`reply_query_failed`).
 *
 * The side effects are the named actors `queryReply`, `postFallback` and `retryTurn`; their logic here is a
 * placeholder that `src/` replaces with `machine.provide({ actors })`. Invokes carry explicit ids so
 * their done/error events (`xstate.done.actor.<id>`, `xstate.error.actor.<id>`) are stable.
 */
import { assign, fromPromise, setup } from 'xstate';
import { stateIsFinal } from './state-nodes.js';
import { MAX_REPLY_RETRIES } from './task-lifecycle.js';

export const REPLY_VERIFIER_MACHINE_ID = 'replyVerifier';
export const REPLY_VERIFIER_MACHINE_VERSION = 1;

/**
 * At most one reply_retry turn per task turn (§5.4 step 3): the task machine's `MAX_REPLY_RETRIES`, the
 * one owner of that rule — the task machine accepts as many REPLY_MISSING for a turn as this
 * machine asks for retry turns (test/unit/machines-reply-retry-limit.test.ts walks both).
 */
export const REPLY_VERIFIER_MAX_RETRIES: number = MAX_REPLY_RETRIES;

/** Invoke ids: the suffix of the done/error events of each invoke. */
export const REPLY_VERIFIER_INVOKE_IDS = {
  query: 'queryReply',
  postFallback: 'postFallback',
  checkFallback: 'checkFallback',
  retryTurn: 'retryTurn',
} as const;

/** Which reply is looked for: the task turn's, on its resource, by the bot, carrying its marker. */
interface ReplyIdentity {
  taskId: string;
  turnKey: string;
  resourceKey: string;
  /** Marker the reply must carry (task, turn and resource identity). */
  marker: string;
  botLogin: string;
  /** Epoch ms: only comments created at or after this count. */
  turnStartedAt: number;
}

export interface ReplyVerifierInput extends ReplyIdentity {
  /** Failure the agent's MCP call reported, when it reported one. */
  mcpFailureReason?: string | null;
}

export interface QueryReplyInput {
  taskId: string;
  turnKey: string;
  resourceKey: string;
  marker: string;
  botLogin: string;
  since: number;
}

export type QueryReplyOutput = { found: true; commentId: number } | { found: false };

export interface PostFallbackInput {
  taskId: string;
  turnKey: string;
  resourceKey: string;
  marker: string;
  mcpFailureReason: string | null;
}

/** Which verifier's retry turn `retryTurn` asks its task for. */
export interface RetryTurnInput {
  taskId: string;
  turnKey: string;
}

export interface PostFallbackOutput {
  posted: true;
  commentId: number;
}

export type ReplyVerifierResult = 'confirmed' | 'confirmed_via_fallback' | 'failed';

export type ReplyVerifierErrorCode =
  | 'reply_query_failed'
  | 'rest_fallback_failed'
  | 'rest_fallback_unconfirmed';

export interface ReplyVerifierContext extends ReplyIdentity {
  replyRetries: number;
  /** The original MCP reply failure, kept through the fallback (e.g. `mcp_reply_missing`). */
  mcpFailureReason: string | null;
  /** The confirmed reply (or fallback) comment. */
  commentId: number | null;
  fallbackCommentId: number | null;
  errorCode: ReplyVerifierErrorCode | null;
  /** Message of the last actor error, for the audit log. */
  errorMessage: string | null;
  lastRetryTurnError: string | null;
  result: ReplyVerifierResult | null;
}

/** What `queryReply` looks for: the same question when checking the agent's reply and the fallback. */
function replyQueryInput(context: ReplyVerifierContext) {
  return {
    taskId: context.taskId,
    turnKey: context.turnKey,
    resourceKey: context.resourceKey,
    marker: context.marker,
    botLogin: context.botLogin,
    since: context.turnStartedAt,
  };
}

/** How the retry turn went, sent by the `retryTurn` effect; invoke done/error events are produced by the invoked actors. */
export type ReplyVerifierEvent =
  | { type: 'RETRY_TURN_DONE' }
  | { type: 'RETRY_TURN_FAILED'; errorCode?: string };

export interface ReplyVerifierOutput {
  result: ReplyVerifierResult;
  commentId: number | null;
  errorCode: ReplyVerifierErrorCode | null;
  mcpFailureReason: string | null;
}

/** An Error, or an error that lost its class on its way through a snapshot: its message; else the value. */
function errorMessageOf(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'message' in error) return String(error.message);
  return String(error);
}

/** A query (the agent's reply, or the fallback) found the comment: record it and end in `target`. */
function whenReplyFound(target: 'confirmed' | 'confirmed_via_fallback') {
  return {
    guard: {
      type: 'replyFound' as const,
      params: ({ event }: { event: { output: QueryReplyOutput } }) => ({ found: event.output.found }),
    },
    target,
    actions: {
      type: 'recordReply' as const,
      params: ({ event }: { event: { output: QueryReplyOutput } }) => ({
        commentId: event.output.found ? event.output.commentId : null,
      }),
    },
  };
}

/** §5.4: a failed or unknown query answer never leads to a write: the verification fails. */
const queryFailed = {
  target: 'failed',
  actions: {
    type: 'recordFailure' as const,
    params: ({ event }: { event: { error: unknown } }) => ({ errorCode: 'reply_query_failed' as const, error: event.error }),
  },
};

export const replyVerifierMachine = setup({
  types: {
    context: {} as ReplyVerifierContext,
    events: {} as ReplyVerifierEvent,
    input: {} as ReplyVerifierInput,
    output: {} as ReplyVerifierOutput,
  },
  actors: {
    /** Lists the resource's comments and looks for the bot's comment with the marker. */
    queryReply: fromPromise<QueryReplyOutput, QueryReplyInput>(async () => {
      throw new Error('not provided: queryReply');
    }),
    /** Posts the fallback comment through REST with the bot token; idempotent by marker. */
    postFallback: fromPromise<PostFallbackOutput, PostFallbackInput>(async () => {
      throw new Error('not provided: postFallback');
    }),
    /**
     * Asks the task for the one reply_retry turn and reports RETRY_TURN_DONE or RETRY_TURN_FAILED; it
     * settles on nothing, so until provided the verifier waits here.
     */
    retryTurn: fromPromise<void, RetryTurnInput>(() => new Promise<void>(() => undefined)),
  },
  guards: {
    /** The query found the reply. */
    replyFound: (_, params: { found: boolean }) => params.found,
    /** A reply_retry turn is still allowed (replyRetries < REPLY_VERIFIER_MAX_RETRIES). */
    canRetryReplyTurn: ({ context }) => context.replyRetries < REPLY_VERIFIER_MAX_RETRIES,
  },
  actions: {
    recordReply: assign((_, params: { commentId: number | null }) => ({ commentId: params.commentId })),
    recordReplyMissing: assign(({ context }) => ({
      mcpFailureReason: context.mcpFailureReason ?? 'mcp_reply_missing',
    })),
    countReplyRetry: assign(({ context }) => ({ replyRetries: context.replyRetries + 1 })),
    recordRetryTurnFailed: assign(({ event }) =>
      event.type === 'RETRY_TURN_FAILED' ? { lastRetryTurnError: event.errorCode ?? 'retry_turn_failed' } : {},
    ),
    recordFallbackPosted: assign((_, params: { commentId: number }) => ({ fallbackCommentId: params.commentId })),
    recordFailure: assign((_, params: { errorCode: ReplyVerifierErrorCode; error?: unknown }) => ({
      errorCode: params.errorCode,
      errorMessage: params.error === undefined ? null : errorMessageOf(params.error),
    })),
    setResult: assign((_, params: { result: ReplyVerifierResult }) => ({ result: params.result })),
  },
}).createMachine({
  id: REPLY_VERIFIER_MACHINE_ID,
  description:
    'Confirms a task turn\'s final reply on Gitea: query; if explicitly missing, one reply_retry turn; ' +
    'then one REST fallback (idempotent by marker) and a confirming query. A failed query never writes.',
  context: ({ input }) => ({
    taskId: input.taskId,
    turnKey: input.turnKey,
    resourceKey: input.resourceKey,
    marker: input.marker,
    botLogin: input.botLogin,
    turnStartedAt: input.turnStartedAt,
    replyRetries: 0,
    mcpFailureReason: input.mcpFailureReason ?? null,
    commentId: null,
    fallbackCommentId: null,
    errorCode: null,
    errorMessage: null,
    lastRetryTurnError: null,
    result: null,
  }),
  initial: 'querying',
  output: ({ context }) => ({
    result: context.result ?? 'failed',
    commentId: context.commentId,
    errorCode: context.errorCode,
    mcpFailureReason: context.mcpFailureReason,
  }),
  states: {
    querying: {
      description: 'Looking for the bot\'s reply with the marker on the resource.',
      invoke: {
        id: REPLY_VERIFIER_INVOKE_IDS.query,
        src: 'queryReply',
        input: ({ context }) => replyQueryInput(context),
        onDone: [
          whenReplyFound('confirmed'),
          {
            guard: 'canRetryReplyTurn',
            target: 'awaiting_retry_turn',
            actions: ['recordReplyMissing', 'countReplyRetry'],
          },
          { target: 'fallback_posting', actions: 'recordReplyMissing' },
        ],
        onError: queryFailed,
      },
    },
    awaiting_retry_turn: {
      description:
        'The reply is explicitly missing: the invoked retryTurn asks the task for one reply_retry turn on ' +
        'the same thread ("re-post the last final text only") and reports RETRY_TURN_DONE or RETRY_TURN_FAILED.',
      invoke: {
        id: REPLY_VERIFIER_INVOKE_IDS.retryTurn,
        src: 'retryTurn',
        input: ({ context }) => ({ taskId: context.taskId, turnKey: context.turnKey }),
      },
      on: {
        RETRY_TURN_DONE: { target: 'querying' },
        RETRY_TURN_FAILED: { target: 'fallback_posting', actions: 'recordRetryTurnFailed' },
      },
    },
    fallback_posting: {
      description: 'Posting the fallback comment via REST with the same marker (idempotent by marker).',
      invoke: {
        id: REPLY_VERIFIER_INVOKE_IDS.postFallback,
        src: 'postFallback',
        input: ({ context }) => ({
          taskId: context.taskId,
          turnKey: context.turnKey,
          resourceKey: context.resourceKey,
          marker: context.marker,
          mcpFailureReason: context.mcpFailureReason,
        }),
        onDone: {
          target: 'fallback_checking',
          actions: { type: 'recordFallbackPosted', params: ({ event }) => ({ commentId: event.output.commentId }) },
        },
        onError: {
          target: 'failed',
          actions: {
            type: 'recordFailure',
            params: ({ event }) => ({ errorCode: 'rest_fallback_failed', error: event.error }),
          },
        },
      },
    },
    fallback_checking: {
      description: 'Querying again to confirm the fallback comment is visible.',
      invoke: {
        id: REPLY_VERIFIER_INVOKE_IDS.checkFallback,
        src: 'queryReply',
        input: ({ context }) => replyQueryInput(context),
        onDone: [
          whenReplyFound('confirmed_via_fallback'),
          {
            target: 'failed',
            actions: { type: 'recordFailure', params: { errorCode: 'rest_fallback_unconfirmed' } },
          },
        ],
        onError: queryFailed,
      },
    },
    confirmed: {
      type: 'final',
      description: 'The agent\'s reply is on Gitea (task → succeeded).',
      entry: { type: 'setResult', params: { result: 'confirmed' } },
    },
    confirmed_via_fallback: {
      type: 'final',
      description: 'The REST fallback comment is on Gitea (task → succeeded_with_rest_fallback).',
      entry: { type: 'setResult', params: { result: 'confirmed_via_fallback' } },
    },
    failed: {
      type: 'final',
      description: 'Could not confirm a reply; errorCode says why (task → failed_reply).',
      entry: { type: 'setResult', params: { result: 'failed' } },
    },
  },
});

export type ReplyVerifierMachine = typeof replyVerifierMachine;

/**
 * The verdict a verifier in `state` has reached: each final state is named after its result (its
 * entry sets `result` to that name); null while it is still verifying or for an unknown state.
 */
export function replyVerdictOf(state: string | null | undefined): ReplyVerifierResult | null {
  return stateIsFinal(replyVerifierMachine, state) ? (state as ReplyVerifierResult) : null;
}

/** Any event the verifier handles, including the invokes' done/error events. */
export type ReplyVerifierAnyEvent =
  | ReplyVerifierEvent
  | { type: `xstate.done.actor.${string}`; output: unknown }
  | { type: `xstate.error.actor.${string}`; error: unknown };

interface ReplyVerifierSnapshotLike {
  value: unknown;
  context: ReplyVerifierContext;
}

/**
 * Sample events for model-based traversal, including synthesized invoke done/error events: the
 * reply found / missing on both queries, the fallback posted / failing, and every query failing.
 */
export function REPLY_VERIFIER_EVENT_CASES(_snapshot: ReplyVerifierSnapshotLike): ReplyVerifierAnyEvent[] {
  const { query, postFallback, checkFallback } = REPLY_VERIFIER_INVOKE_IDS;
  const failure = { name: 'Error', message: 'model: synthetic failure' };
  return [
    { type: `xstate.done.actor.${query}`, output: { found: true, commentId: 101 } },
    { type: `xstate.done.actor.${query}`, output: { found: false } },
    { type: `xstate.error.actor.${query}`, error: failure },
    { type: 'RETRY_TURN_DONE' },
    { type: 'RETRY_TURN_FAILED', errorCode: 'retry_turn_failed' },
    { type: `xstate.done.actor.${postFallback}`, output: { posted: true, commentId: 202 } },
    { type: `xstate.error.actor.${postFallback}`, error: failure },
    { type: `xstate.done.actor.${checkFallback}`, output: { found: true, commentId: 202 } },
    { type: `xstate.done.actor.${checkFallback}`, output: { found: false } },
    { type: `xstate.error.actor.${checkFallback}`, error: failure },
  ];
}

/** Graph serialization: the state and `replyRetries` (read by `canRetryReplyTurn`, at most 1). */
export function serializeReplyVerifierForGraph(snapshot: ReplyVerifierSnapshotLike): string {
  return JSON.stringify({ value: snapshot.value, replyRetries: snapshot.context.replyRetries });
}
