#!/usr/bin/env node
// A stand-in for the official gitea-mcp binary (gitea.com/gitea/gitea-mcp). No agent turn in the
// tests uses it: they all run the real binary (test/support/real-gitea-mcp.ts, no fallback). It is
// kept ONLY for the two start-up faults the real binary cannot be made to show (STANDIN_MODE below):
// exiting before the handshake (the real one starts without reaching Gitea, whatever its host or
// token) and never answering `initialize` (the real one answers in ~20 ms). See index.ts.
//
// Its tool implementations (comment tools under BOTH the old names, up to 2026-03-05, and the new
// ones, forwarding to Gitea's REST API) are only exercised by its own test. They are NOT a faithful
// model of the real a5dd03c7f0d8 binary, which: has only the new names (49 tools, incl. get_me);
// ignores `issue_number` ("index is required"); reports failures as JSON-RPC errors (-32603, e.g.
// "create o/r/issue/N/comment err: <Gitea message>"; unknown tool -32602) rather than isError
// results; calls GET /api/v1/version before every tool call; writes $HOME/.gitea-mcp/gitea-mcp.log.
//
// Plain ESM importing only @modelcontextprotocol/sdk so that it starts fast under plain `node`.
//
// Flags (like gitea-mcp): -t/--transport stdio, -H/--host/-host URL, -T/--token/-token T,
//   -r/--read-only, -d/--debug.  Env: GITEA_HOST, GITEA_ACCESS_TOKEN, GITEA_READONLY.
// Test switches (env):
//   STANDIN_MODE=exit-immediately   exit(1) before reading stdin (an MCP start failure)
//   STANDIN_MODE=hang-initialize    never answer `initialize` (a handshake timeout)
//   STANDIN_TOOLSET=both|old|new     which generation of tool names to expose (default both)
//   STANDIN_CALL_LOG=/path/file      append one JSON line per tool call {tool, arguments, isError}
import { appendFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const mode = process.env.STANDIN_MODE ?? '';
// Test hygiene: Codex starts MCP servers in their own process groups, so an app-server that is
// SIGKILLed leaves them behind. Exit once orphaned, or when stdin (the MCP channel) ends.
const parentPid = process.ppid;
setInterval(() => {
  if (process.ppid !== parentPid) process.exit(0);
}, 250).unref();
process.stdin.on('end', () => process.exit(0));
if (mode === 'exit-immediately') {
  process.stderr.write('gitea-mcp stand-in: exiting immediately (STANDIN_MODE=exit-immediately)\n');
  process.exit(1);
}
if (mode === 'hang-initialize') {
  // Keep stdin open and read it, but never answer anything.
  process.stdin.resume();
  process.stdin.on('data', () => {});
  setInterval(() => {}, 1 << 30);
} else {
  await main();
}

function parseArgs(argv) {
  const out = { transport: 'stdio', host: undefined, token: undefined, readOnly: false, debug: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const next = () => inline ?? argv[++i];
    switch (flag) {
      case '-t': case '--transport': case '-transport': out.transport = next(); break;
      case '-H': case '--host': case '-host': out.host = next(); break;
      case '-T': case '--token': case '-token': out.token = next(); break;
      case '-r': case '--read-only': case '-read-only': out.readOnly = true; break;
      case '-d': case '--debug': case '-debug': out.debug = true; break;
      case '-k': case '--insecure': case '-insecure': break;
      default: break;
    }
  }
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.transport && args.transport !== 'stdio') {
    process.stderr.write(`gitea-mcp stand-in: only stdio transport is supported (got ${args.transport})\n`);
    process.exit(2);
  }
  const host = (args.host ?? process.env.GITEA_HOST ?? 'https://gitea.com').replace(/\/+$/, '');
  const token = args.token ?? process.env.GITEA_ACCESS_TOKEN ?? '';
  const readOnly = args.readOnly || /^(1|true|yes)$/i.test(process.env.GITEA_READONLY ?? '');
  const toolset = process.env.STANDIN_TOOLSET ?? 'both';
  const callLog = process.env.STANDIN_CALL_LOG;

  const str = (description) => ({ type: 'string', description });
  const num = (description) => ({ type: 'number', description });
  const owner = str('repository owner');
  const repo = str('repository name');

  /** @type {{tool: object, write: boolean, gen: 'old'|'new', run: (a: any) => Promise<any>}[]} */
  const defs = [
    // ---- old names (gitea-mcp up to 2026-03-05): results are {"Result": <full Gitea object>}
    {
      gen: 'old', write: false,
      tool: {
        name: 'get_my_user_info', description: 'Get my user info',
        inputSchema: { type: 'object', properties: {} },
      },
      run: async () => wrapOld(await api('GET', '/user')),
    },
    {
      gen: 'old', write: false,
      tool: {
        name: 'get_issue_by_index', description: 'get issue by index',
        inputSchema: { type: 'object', properties: { owner, repo, index: num('repository issue index') }, required: ['owner', 'repo', 'index'] },
      },
      run: async (a) => wrapOld(await api('GET', `/repos/${seg(a.owner)}/${seg(a.repo)}/issues/${index(a)}`)),
    },
    {
      gen: 'old', write: false,
      tool: {
        name: 'get_issue_comments_by_index', description: 'get issue comment by index',
        inputSchema: { type: 'object', properties: { owner, repo, index: num('repository issue index') }, required: ['owner', 'repo', 'index'] },
      },
      run: async (a) => wrapOld(await api('GET', `/repos/${seg(a.owner)}/${seg(a.repo)}/issues/${index(a)}/comments`)),
    },
    {
      gen: 'old', write: true,
      tool: {
        name: 'create_issue_comment', description: 'create issue comment',
        inputSchema: {
          type: 'object',
          properties: { owner, repo, index: num('repository issue index'), body: str('issue comment body') },
          required: ['owner', 'repo', 'index', 'body'],
        },
      },
      run: async (a) => wrapOld(await api('POST', `/repos/${seg(a.owner)}/${seg(a.repo)}/issues/${index(a)}/comments`, { body: need(a, 'body') })),
    },
    {
      gen: 'old', write: true,
      tool: {
        name: 'edit_issue_comment', description: 'edit issue comment',
        inputSchema: {
          type: 'object',
          properties: { owner, repo, commentID: num('id of issue comment'), body: str('issue comment body') },
          required: ['owner', 'repo', 'commentID', 'body'],
        },
      },
      run: async (a) => wrapOld(await api('PATCH', `/repos/${seg(a.owner)}/${seg(a.repo)}/issues/comments/${intArg(a, 'commentID')}`, { body: need(a, 'body') })),
    },
    // ---- new names (gitea-mcp from 2026-03-06): slim results
    {
      gen: 'new', write: false,
      tool: {
        name: 'issue_read',
        description: "Get information about a specific issue. Use method 'get' for issue details, 'get_comments' for issue comments, 'get_labels' for issue labels.",
        inputSchema: {
          type: 'object',
          properties: {
            method: { type: 'string', description: 'operation to perform', enum: ['get', 'get_comments', 'get_labels'] },
            owner, repo, index: num('repository issue index'),
          },
          required: ['method', 'owner', 'repo', 'index'],
        },
      },
      run: async (a) => {
        const base = `/repos/${seg(a.owner)}/${seg(a.repo)}/issues/${index(a)}`;
        switch (a.method) {
          case 'get': return slimIssue(await api('GET', base));
          case 'get_comments': return (await api('GET', `${base}/comments`)).map(slimComment);
          case 'get_labels': return [];
          default: throw new ToolError(`unknown method: ${a.method}`);
        }
      },
    },
    {
      gen: 'new', write: true,
      tool: {
        name: 'issue_write',
        description: "Create or update issues and comments, manage labels. Use method 'create' to create an issue, 'update' to edit, 'add_comment'/'edit_comment' for comments, 'add_labels'/'remove_label'/'replace_labels'/'clear_labels' for label management.",
        inputSchema: {
          type: 'object',
          properties: {
            method: {
              type: 'string', description: 'operation to perform',
              enum: ['create', 'update', 'add_comment', 'edit_comment', 'add_labels', 'remove_label', 'replace_labels', 'clear_labels'],
            },
            owner, repo,
            index: num("issue index (required for all methods except 'create')"),
            title: str("issue title (required for 'create')"),
            body: str("issue/comment body (required for 'create', 'add_comment', 'edit_comment')"),
            state: str("issue state, one of open, closed, all (for 'update')"),
            commentID: num("id of issue comment (required for 'edit_comment')"),
          },
          required: ['method', 'owner', 'repo'],
        },
      },
      run: async (a) => {
        const r = `/repos/${seg(a.owner)}/${seg(a.repo)}`;
        switch (a.method) {
          case 'add_comment':
            return slimComment(await api('POST', `${r}/issues/${index(a)}/comments`, { body: need(a, 'body') }));
          case 'edit_comment':
            return slimComment(await api('PATCH', `${r}/issues/comments/${intArg(a, 'commentID')}`, { body: need(a, 'body') }));
          default:
            throw new ToolError(`method ${a.method} is not supported by the gitea-mcp stand-in`);
        }
      },
    },
  ];

  const active = defs.filter((d) => (toolset === 'both' || d.gen === toolset) && (!readOnly || !d.write));
  const byName = new Map(active.map((d) => [d.tool.name, d]));

  class ToolError extends Error {}

  function seg(v) {
    if (typeof v !== 'string' || v === '') throw new ToolError('owner/repo is required');
    return encodeURIComponent(v);
  }
  function need(a, k) {
    if (typeof a[k] !== 'string') throw new ToolError(`${k} is required`);
    return a[k];
  }
  function intArg(a, k) {
    const v = a[k];
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : NaN;
    if (!Number.isInteger(n)) throw new ToolError(`${k} is required`);
    return n;
  }
  const index = (a) => intArg(a.index === undefined && a.issue_number !== undefined ? { index: a.issue_number } : a, 'index');
  const wrapOld = (v) => ({ Result: v });
  const login = (u) => (u && typeof u === 'object' ? u.login ?? '' : '');
  function slimComment(c) {
    return { id: c.id, body: c.body, user: login(c.user), html_url: c.html_url, created_at: c.created_at, updated_at: c.updated_at };
  }
  function slimIssue(i) {
    const m = {
      number: i.number, title: i.title, body: i.body, state: i.state, html_url: i.html_url, user: login(i.user),
      comments: i.comments, is_locked: i.is_locked, created_at: i.created_at, updated_at: i.updated_at,
    };
    if (i.pull_request) m.is_pull = true;
    return m;
  }

  async function api(method, path, body) {
    const res = await fetch(`${host}/api/v1${path}`, {
      method,
      headers: {
        Authorization: `token ${token}`,
        Accept: 'application/json',
        ...(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    if (!res.ok) {
      let msg = text;
      try { msg = JSON.parse(text).message ?? text; } catch { /* not JSON */ }
      // Same wording style as the Go SDK: "<status>: <message>"; never the token.
      throw new ToolError(`${method} ${path}: ${res.status} ${res.statusText}: ${String(msg).split(token || '\u0000').join('***')}`);
    }
    return text ? JSON.parse(text) : null;
  }

  const server = new Server({ name: 'Gitea MCP Server', version: 'standin-1.0.0' }, { capabilities: { tools: {} } });

  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: active.map((d) => d.tool) }));

  server.setRequestHandler(CallToolRequestSchema, async (req) => {
    const name = req.params.name;
    const a = req.params.arguments ?? {};
    const def = byName.get(name);
    let result;
    if (!def) {
      result = { isError: true, content: [{ type: 'text', text: `tool not found: ${name}` }] };
    } else {
      try {
        const value = await def.run(a);
        result = { content: [{ type: 'text', text: JSON.stringify(value) }] };
      } catch (e) {
        result = { isError: true, content: [{ type: 'text', text: `${name} err: ${e instanceof Error ? e.message : String(e)}` }] };
      }
    }
    if (callLog) {
      try {
        appendFileSync(callLog, `${JSON.stringify({ tool: name, arguments: a, isError: Boolean(result.isError), at: new Date().toISOString() })}\n`);
      } catch { /* best effort */ }
    }
    return result;
  });

  if (args.debug) process.stderr.write(`gitea-mcp stand-in: host=${host} tools=${active.map((d) => d.tool.name).join(',')}\n`);
  await server.connect(new StdioServerTransport());
}
