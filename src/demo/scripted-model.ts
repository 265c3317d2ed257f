// A loopback fake of the OpenAI Responses API (`POST /v1/responses`, SSE) driven by a per-test
// script, so the real `codex app-server` can run turns fully offline. Wire format (as the real
// codex 0.171 speaks it): `event: <type>\ndata: <json>` events, described step by step below.
//
// Each POST /v1/responses consumes ONE step of the queue:
//   {type:'message', text}                               assistant message, turn ends
//   {type:'tool_call', name, namespace?, arguments}      a function call (MCP tools: namespace 'mcp__<server>')
//   {type:'shell', command}                              Codex's shell tool (name/args learned from the request)
//   {type:'fail', status?}                               HTTP error (default 500) → the turn fails
//   {type:'stall'}                                       `response.created`, then nothing until close()
// When the queue is empty the fake answers with a message "(script exhausted)".
//
// Usage: every completed response reports `response.completed.usage` (what the real app-server turns
// into `thread/tokenUsage/updated`): a step's own `usage`, else the model's current default
// (`setUsage`, initially 10 in / 5 out). A step's `headers` are sent with the HTTP response, which is
// how the Responses API reports rate limits (`x-codex-primary-used-percent`, …) and a 429's
// `retry-after`.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';

/** Token counts of one response, as the Responses API reports them. */
export interface ScriptedUsage {
  input: number;
  output: number;
  cachedInput?: number;
  reasoningOutput?: number;
}

interface StepExtras {
  /** Usage reported in this response's `response.completed`. */
  usage?: ScriptedUsage;
  /** Extra HTTP response headers (rate-limit headers, retry-after). */
  headers?: Record<string, string>;
  /** Waits this long after `response.created` before the output: a model that takes its time (bench:cluster). */
  delayMs?: number;
}

export type ScriptStep = (
  | { type: 'message'; text: string; deltas?: string[] }
  | {
      type: 'tool_call';
      name: string;
      namespace?: string;
      /** A function computes them from the request (e.g. to echo the marker from the prompt). */
      arguments: Record<string, unknown> | string | ((requestBody: any) => Record<string, unknown>);
      callId?: string;
    }
  | { type: 'shell'; command: string | string[]; callId?: string; workdir?: string; timeoutMs?: number }
  | { type: 'fail'; status?: number; body?: string }
  | { type: 'stall' }
) &
  StepExtras;

export interface RecordedRequest {
  readonly at: number;
  readonly method: string;
  readonly path: string;
  readonly body: any;
  readonly step: ScriptStep | null;
}

export interface ScriptedModel {
  readonly port: number;
  readonly baseUrl: string;
  /** Every request received (responses and anything else), in order. */
  readonly requests: RecordedRequest[];
  /** Append steps to the script. */
  push(...steps: ScriptStep[]): void;
  /** The usage reported by steps that do not carry their own (null: report none). */
  setUsage(usage: ScriptedUsage | null): void;
  /** Decides the step for a request when the script is empty (a scripted agent for demos and soak runs). */
  setResponder(responder: ((requestBody: any) => ScriptStep) | null): void;
  /** Steps not yet consumed. */
  pending(): number;
  /** Resolves when at least `n` /v1/responses requests have been received. */
  waitForResponsesRequests(n: number, timeoutMs?: number): Promise<void>;
  /** `/v1/responses` request bodies only. */
  responsesBodies(): any[];
  /** All `function_call_output` items seen in request inputs (deduplicated by call_id). */
  functionCallOutputs(): Array<{ call_id: string; output: unknown }>;
  /** Names of the tools Codex offered in the last /v1/responses request. */
  toolNames(): string[];
  /** The shell tool Codex exposes (learned from the request `tools`), if any. */
  shellTool(): { name: string; parameters: unknown } | null;
  close(): Promise<void>;
}

let seq = 0;
const nextId = (p: string) => `${p}_${++seq}`;

function sse(res: ServerResponse, type: string, data: Record<string, unknown>): void {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

function usageJson(u: ScriptedUsage): Record<string, unknown> {
  return {
    input_tokens: u.input,
    output_tokens: u.output,
    total_tokens: u.input + u.output,
    input_tokens_details: u.cachedInput === undefined ? null : { cached_tokens: u.cachedInput },
    output_tokens_details: u.reasoningOutput === undefined ? null : { reasoning_tokens: u.reasoningOutput },
  };
}

/** Shell tool names Codex has used across versions, most likely first. */
const SHELL_TOOL_NAMES = ['exec_command', 'shell_command', 'shell', 'local_shell', 'container.exec'];

function findShellTool(body: any): { name: string; parameters: unknown } | null {
  const tools: any[] = Array.isArray(body?.tools) ? body.tools : [];
  for (const name of SHELL_TOOL_NAMES) {
    const t = tools.find((x) => x?.name === name);
    if (t) return { name, parameters: t.parameters ?? null };
  }
  return null;
}

function shellArguments(tool: { name: string; parameters: any } | null, step: Extract<ScriptStep, { type: 'shell' }>) {
  const props: Record<string, any> = tool?.parameters?.properties ?? {};
  const args: Record<string, unknown> = {};
  // `exec_command` takes {cmd: string}; `shell_command` {command: string}; `shell` {command: string[]}.
  const asString = Array.isArray(step.command) ? step.command.join(' ') : step.command;
  if ('cmd' in props) args.cmd = asString;
  else if (props.command?.type === 'array') args.command = Array.isArray(step.command) ? step.command : ['bash', '-lc', step.command];
  else args.command = asString;
  if (step.workdir) args.workdir = step.workdir;
  if (step.timeoutMs !== undefined) {
    if ('timeout_ms' in props) args.timeout_ms = step.timeoutMs;
    else if ('yield_time_ms' in props) args.yield_time_ms = step.timeoutMs;
  }
  return args;
}

/** `options.port`: a fixed port on 127.0.0.1 (the demo's --model-port); default a free one. */
export async function startScriptedModel(initial: ScriptStep[] = [], options: { port?: number } = {}): Promise<ScriptedModel> {
  const queue: ScriptStep[] = [...initial];
  const requests: RecordedRequest[] = [];
  const stalled = new Set<ServerResponse>();
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  let lastShellTool: { name: string; parameters: unknown } | null = null;
  let responder: ((requestBody: any) => ScriptStep) | null = null;
  let defaultUsage: ScriptedUsage | null = { input: 10, output: 5 };

  const responsesCount = () => requests.filter((r) => r.path.endsWith('/responses')).length;
  const wake = () => {
    for (const w of [...waiters]) {
      if (responsesCount() >= w.n) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    let body: any = raw;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      /* keep raw */
    }
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (req.method !== 'POST' || !path.endsWith('/responses')) {
      requests.push({ at: Date.now(), method: req.method ?? '?', path, body, step: null });
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `scripted model: no route ${req.method} ${path}` } }));
      return;
    }
    const shell = findShellTool(body);
    if (shell) lastShellTool = shell;
    const step = queue.shift() ?? responder?.(body) ?? { type: 'message', text: '(script exhausted)' };
    requests.push({ at: Date.now(), method: 'POST', path, body, step });
    wake();

    if (step.type === 'fail') {
      res.writeHead(step.status ?? 500, { 'content-type': 'application/json', ...step.headers });
      res.end(step.body ?? JSON.stringify({ error: { message: 'scripted failure', type: 'server_error' } }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', ...step.headers });
    const responseId = nextId('resp');
    sse(res, 'response.created', { response: { id: responseId } });
    if (step.type === 'stall') {
      stalled.add(res);
      res.on('close', () => stalled.delete(res));
      return;
    }
    if (step.delayMs) {
      await new Promise((r) => setTimeout(r, step.delayMs));
      // Interrupted meanwhile: Codex has gone.
      if (res.destroyed) return;
    }
    if (step.type === 'message') {
      const id = nextId('msg');
      sse(res, 'response.output_item.added', {
        output_index: 0,
        item: { type: 'message', role: 'assistant', id, content: [] },
      });
      for (const delta of step.deltas ?? [step.text]) {
        sse(res, 'response.output_text.delta', { item_id: id, output_index: 0, content_index: 0, delta });
      }
      sse(res, 'response.output_item.done', {
        output_index: 0,
        item: { type: 'message', role: 'assistant', id, content: [{ type: 'output_text', text: step.text }] },
      });
    } else {
      const callId = step.callId ?? nextId('call');
      let item: Record<string, unknown>;
      if (step.type === 'tool_call') {
        item = {
          type: 'function_call',
          id: nextId('fc'),
          call_id: callId,
          name: step.name,
          ...(step.namespace ? { namespace: step.namespace } : {}),
          arguments:
            typeof step.arguments === 'string'
              ? step.arguments
              : JSON.stringify(typeof step.arguments === 'function' ? step.arguments(body) : step.arguments),
        };
      } else {
        const tool = shell ?? lastShellTool;
        item = {
          type: 'function_call',
          id: nextId('fc'),
          call_id: callId,
          name: tool?.name ?? 'exec_command',
          arguments: JSON.stringify(shellArguments(tool as any, step)),
        };
      }
      sse(res, 'response.output_item.added', { output_index: 0, item });
      sse(res, 'response.output_item.done', { output_index: 0, item });
    }
    const usage = step.usage ?? defaultUsage;
    sse(res, 'response.completed', { response: { id: responseId, ...(usage ? { usage: usageJson(usage) } : {}) } });
    res.end();
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(500);
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  const responsesBodies = () => requests.filter((r) => r.path.endsWith('/responses') && r.step).map((r) => r.body);

  return {
    port,
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    setResponder(r) {
      responder = r;
    },
    setUsage(u) {
      defaultUsage = u;
    },
    push: (...steps) => void queue.push(...steps),
    pending: () => queue.length,
    waitForResponsesRequests: (n, timeoutMs = 30_000) =>
      new Promise<void>((resolve, reject) => {
        if (responsesCount() >= n) return resolve();
        const timer = setTimeout(() => reject(new Error(`scripted model: waited ${timeoutMs} ms for ${n} requests`)), timeoutMs);
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      }),
    responsesBodies,
    functionCallOutputs: () => {
      const seen = new Map<string, { call_id: string; output: unknown }>();
      for (const b of responsesBodies()) {
        for (const it of Array.isArray(b?.input) ? b.input : []) {
          if (it?.type === 'function_call_output' && !seen.has(it.call_id)) seen.set(it.call_id, { call_id: it.call_id, output: it.output });
        }
      }
      return [...seen.values()];
    },
    toolNames: () => {
      const last = responsesBodies().at(-1);
      const tools: any[] = Array.isArray(last?.tools) ? last.tools : [];
      return tools.map((t) => (t?.type === 'namespace' || t?.tools ? `${t.name}{${(t.tools ?? []).map((x: any) => x.name).join(',')}}` : t?.name ?? t?.type));
    },
    shellTool: () => lastShellTool,
    close: async () => {
      for (const res of stalled) res.destroy();
      stalled.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface CodexHomeOptions {
  port: number;
  model?: string;
  /** Extra TOML appended verbatim. */
  extraToml?: string;
}

/** Writes `dir/config.toml` pointing Codex at the scripted model (offline, no plugins, no retries). */
export function writeCodexHome(dir: string, opts: CodexHomeOptions): string {
  mkdirSync(dir, { recursive: true });
  const model = opts.model ?? 'fake-model';
  const toml = `# written by src/demo/scripted-model.ts (loopback only)
model = ${JSON.stringify(model)}
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.fake]
name = "Fake"
base_url = "http://127.0.0.1:${opts.port}/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false

[analytics]
enabled = false
${opts.extraToml ?? ''}`;
  const file = join(dir, 'config.toml');
  writeFileSync(file, toml);
  return file;
}
