// Run one turn and collect its outcome: every `item/completed` of the turn (tool calls included —
// `turn/completed.items` only holds the final message), the final agent message, status and error.
// Notifications are routed by threadId/turnId; those arriving before the `turn/start` response are
// held and replayed once the turn id is known.
import { CodexRpcError, errorText, isInputTooLarge, type CodexAppServerConnection, type CodexNotification } from './jsonrpc-connection.js';
import type { TurnStartParams } from './protocol/ts/v2/TurnStartParams.js';
import type { ThreadItem } from './protocol/ts/v2/ThreadItem.js';

export type TurnStatus = 'completed' | 'interrupted' | 'failed';

/** How Codex reported a turn's end (not the task's outcome: that is domain/turn-outcome.ts, decided in sessions/). */
export interface CodexTurnOutcome {
  turnId: string;
  status: TurnStatus;
  /** All `item/completed` items of the turn, in order. */
  items: ThreadItem[];
  /** Text of the last completed `agentMessage`, or null. */
  finalMessage: string | null;
  /** `turn.error` from `turn/completed` (null when completed). */
  error: unknown;
  /** The agent asked the user something (`item/tool/requestUserInput`): the task goes waiting_user. */
  userInputRequested: Array<{ itemId: string | null; questions: unknown[] }>;
  /** `collaborationMode` was rejected and the plain fallback was used. */
  usedPlainFallback: boolean;
  durationMs: number;
}

export interface RunTurnOptions {
  threadId: string;
  /** `turn/start` params (normally from `turnStartParams`). */
  params: TurnStartParams;
  /** Plain-turn fallback (from `plainTurnStartParams`), used if collaborationMode is rejected/downgraded. */
  plainParams?: TurnStartParams;
  /** Timeout of the `turn/start` request itself. */
  startTimeoutMs?: number;
  /** Called as soon as Codex assigns the turn id (persist it, enable interrupt). */
  onTurnId?: (turnId: string) => void;
  /** Every notification of this turn (for event persistence / eventSeq). */
  onNotification?: (n: CodexNotification) => void;
  /**
   * Each notification that changed what the turn knows (turn/started, item/completed,
   * turn/completed), once: a repeat of one already processed (same item id) is skipped.
   * `eventSeq` counts processed notifications from `initialEventSeq` (persist it).
   */
  onProcessed?: (n: CodexNotification, eventSeq: number) => void;
  initialEventSeq?: number;
}

/** Identity of a processed notification; null for those that carry nothing to process (deltas). */
function processKey(n: CodexNotification): string | null {
  if (n.method === 'item/completed') {
    const id = n.params?.item?.id;
    return typeof id === 'string' ? `item/completed:${id}` : null;
  }
  if (n.method === 'turn/started' || n.method === 'turn/completed') return n.method;
  return null;
}

/**
 * A JSON-RPC rejection of `turn/start` that plausibly concerns collaborationMode. Not an input
 * refused for its size: that too is -32602, and taking it for a downgrade would switch the
 * connection to plain turns for every later task and resend the input larger still.
 */
export function isCollaborationModeRejection(err: unknown): boolean {
  if (!(err instanceof CodexRpcError) || typeof err.code !== 'number') return false;
  if (isInputTooLarge(err)) return false;
  return err.code === -32602 || err.code === -32600 || /collaboration|experimental|unknown field/i.test(err.message);
}

/** Start a turn and wait for `turn/completed`. Rejects with `app_server_exited` if the process dies. */
export async function runTurn(conn: CodexAppServerConnection, opts: RunTurnOptions): Promise<CodexTurnOutcome> {
  const started = Date.now();
  const items: ThreadItem[] = [];
  const userInputRequested: CodexTurnOutcome['userInputRequested'] = [];
  let finalMessage: string | null = null;
  let turnId: string | null = null;
  let settle!: { resolve: (o: CodexTurnOutcome) => void; reject: (e: Error) => void };
  const done = new Promise<CodexTurnOutcome>((resolve, reject) => (settle = { resolve, reject }));
  done.catch(() => undefined); // if turn/start itself fails, `done` is never awaited
  let usedPlainFallback = false;

  const processed = new Set<string>();
  let eventSeq = opts.initialEventSeq ?? 0;
  const route = conn.onThreadTurn(opts.threadId, null, (n) => {
    opts.onNotification?.(n);
    const key = processKey(n);
    if (key !== null) {
      if (processed.has(key)) return;
      processed.add(key);
      eventSeq += 1;
      opts.onProcessed?.(n, eventSeq);
    }
    if (n.method === 'item/completed' && n.params?.item) {
      const item = n.params.item as ThreadItem;
      items.push(item);
      if (item.type === 'agentMessage') finalMessage = item.text;
    } else if (n.method === 'turn/completed') {
      const turn = n.params?.turn ?? {};
      settle.resolve({
        turnId: turn.id ?? turnId ?? '',
        status: (turn.status ?? 'failed') as TurnStatus,
        items,
        finalMessage,
        error: turn.error ?? null,
        userInputRequested,
        usedPlainFallback,
        durationMs: Date.now() - started,
      });
    }
  });
  const offInput = conn.on('user_input_requested', (e) => {
    if (e.threadId === opts.threadId && (turnId === null || e.turnId === null || e.turnId === turnId)) {
      userInputRequested.push({ itemId: e.itemId, questions: e.questions });
    }
  });
  const offExit = conn.on('exit', (e) =>
    settle.reject(new CodexRpcError('turn/start', 'app_server_exited', `app-server exited during the turn (code ${String(e.code)}, signal ${String(e.signal)})`)),
  );

  try {
    let params = opts.params;
    if (opts.plainParams && params.collaborationMode && !conn.collaborationModeUsable) {
      params = opts.plainParams;
      usedPlainFallback = true;
    }
    let res: any;
    try {
      res = await conn.request('turn/start', params, { timeoutMs: opts.startTimeoutMs ?? 60_000 });
    } catch (err) {
      if (!opts.plainParams || !params.collaborationMode || !isCollaborationModeRejection(err)) throw err;
      conn.recordCapabilityDowngrade('collaborationMode', errorText(err));
      usedPlainFallback = true;
      res = await conn.request('turn/start', opts.plainParams, { timeoutMs: opts.startTimeoutMs ?? 60_000 });
    }
    const id = res?.turn?.id;
    if (typeof id !== 'string') throw new CodexRpcError('turn/start', -32603, 'turn/start returned no turn id');
    turnId = id;
    opts.onTurnId?.(id);
    route.setTurnId(id);
    return await done;
  } finally {
    route.unsubscribe();
    offInput();
    offExit();
  }
}
