// A stand-in `codex app-server` speaking the JSONL protocol (no `jsonrpc` field), for start-up-chain
// tests the real binary cannot reproduce. Behaviour via env:
//   STUB_REJECT_PROBES=1         experimentalFeature/enablement/set and collaborationMode/list → error
//   STUB_REJECT_COLLAB_TURN=1    turn/start with collaborationMode → error -32602
//   STUB_UNKNOWN_NOTIFICATION=1  emits an unknown notification after `initialized`
//   STUB_SERVER_REQUEST=<method> after `initialized`, sends that server→client request (id "srv-1")
//   STUB_DUPLICATE_NOTIFICATIONS=1  every turn's item/completed and turn/completed are sent twice
//   STUB_TURN_BEGINS_AFTER_REFUSALS=<n>  turn/start answers at once, but the turn begins (turn/started)
//                                only once <n> turn/interrupt calls were refused with -32600 "no active
//                                turn to interrupt", as the real server answers in that window under load
//                                (seen in CI); once begun it runs until interrupted (turn/completed interrupted)
// Every received message is appended to $STUB_APP_SERVER_LOG (JSON lines).
import { appendFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const logFile = process.env.STUB_APP_SERVER_LOG;
const send = (m: unknown) => process.stdout.write(`${JSON.stringify(m)}\n`);
let initialized = false;
let turnSeq = 0;
/** STUB_TURN_BEGINS_AFTER_REFUSALS: the turn not begun yet, and the one that has begun and runs until interrupted. */
let pendingTurn: { threadId: string; turnId: string; refusalsLeft: number } | null = null;
let activeTurn: { threadId: string; turnId: string } | null = null;
if (logFile) {
  const sensitive = Object.keys(process.env).filter((k) => /TOKEN|SECRET/i.test(k)).sort();
  appendFileSync(logFile, `${JSON.stringify({ stub: 'env', sensitiveEnvNames: sensitive, hasCodexHome: !!process.env.CODEX_HOME })}\n`);
}

createInterface({ input: process.stdin }).on('line', (line) => {
  const msg = JSON.parse(line);
  if (logFile) appendFileSync(logFile, `${line}\n`);
  const { id, method, params } = msg;
  if (method === undefined) return; // a response to our server request
  if (id === undefined) {
    if (method === 'initialized') {
      initialized = true;
      if (process.env.STUB_UNKNOWN_NOTIFICATION) send({ method: 'stub/somethingNew', params: { x: 1 } });
      if (process.env.STUB_SERVER_REQUEST) {
        send({ id: 'srv-1', method: process.env.STUB_SERVER_REQUEST, params: { threadId: 'thr-stub', turnId: 'turn-stub', itemId: 'item-1', questions: [{ id: 'q1', header: 'H', question: 'Which branch?', isOther: false, isSecret: false, options: null }] } });
      }
    }
    return;
  }
  if (method === 'initialize') return send({ id, result: { userAgent: 'stub/0.0.0', codexHome: '/nowhere', platformFamily: 'unix', platformOs: 'linux' } });
  if (!initialized) return send({ id, error: { code: -32600, message: 'Not initialized' } });
  switch (method) {
    case 'experimentalFeature/enablement/set':
    case 'collaborationMode/list':
      if (process.env.STUB_REJECT_PROBES) return send({ id, error: { code: -32601, message: `method not found: ${method}` } });
      return send({ id, result: method === 'collaborationMode/list' ? { data: [{ name: 'Default', mode: 'default', model: null, reasoning_effort: null }] } : { enablement: {} } });
    case 'config/read':
      return send({ id, result: { config: { model: 'stub-model', model_provider: 'stub' }, origins: {}, layers: null } });
    case 'thread/start':
      return send({ id, result: { thread: { id: 'thr-stub' } } });
    case 'turn/interrupt': {
      if (!activeTurn || activeTurn.turnId !== params?.turnId) {
        send({ id, error: { code: -32600, message: 'no active turn to interrupt' } });
        if (pendingTurn && pendingTurn.turnId === params?.turnId && --pendingTurn.refusalsLeft <= 0) {
          activeTurn = { threadId: pendingTurn.threadId, turnId: pendingTurn.turnId };
          pendingTurn = null;
          send({ method: 'turn/started', params: { threadId: activeTurn.threadId, turn: { id: activeTurn.turnId, status: 'inProgress', items: [] } } });
        }
        return;
      }
      const { threadId, turnId } = activeTurn;
      activeTurn = null;
      send({ id, result: {} });
      return send({ method: 'turn/completed', params: { threadId, turn: { id: turnId, status: 'interrupted', items: [], error: null } } });
    }
    case 'turn/start': {
      if (params?.collaborationMode && process.env.STUB_REJECT_COLLAB_TURN) {
        return send({ id, error: { code: -32602, message: 'Invalid params: unknown field `collaborationMode`' } });
      }
      const turnId = `turn-${++turnSeq}`;
      const threadId = params.threadId;
      if (process.env.STUB_TURN_BEGINS_AFTER_REFUSALS) {
        send({ id, result: { turn: { id: turnId, status: 'inProgress', items: [] } } });
        pendingTurn = { threadId, turnId, refusalsLeft: Number(process.env.STUB_TURN_BEGINS_AFTER_REFUSALS) };
        return;
      }
      // Notifications BEFORE the response, as the real server may do.
      send({ method: 'turn/started', params: { threadId, turn: { id: turnId, status: 'inProgress', items: [] } } });
      const item = { type: 'agentMessage', id: `msg-${turnSeq}`, text: `stub reply (collab=${params?.collaborationMode ? 'yes' : 'no'}, model=${params?.model ?? params?.collaborationMode?.settings?.model})` };
      const times = process.env.STUB_DUPLICATE_NOTIFICATIONS ? 2 : 1;
      for (let i = 0; i < times; i++) send({ method: 'item/completed', params: { threadId, turnId, item } });
      send({ id, result: { turn: { id: turnId, status: 'inProgress', items: [] } } });
      setTimeout(() => {
        for (let i = 0; i < times; i++) send({ method: 'turn/completed', params: { threadId, turn: { id: turnId, status: 'completed', items: [item], error: null } } });
      }, 5);
      return;
    }
    default:
      return send({ id, error: { code: -32601, message: `stub: unsupported ${method}` } });
  }
});
process.stdin.on('end', () => process.exit(0));
