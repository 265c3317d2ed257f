// A stand-in gitea MCP server (stdio) for Codex integration tests, built with @modelcontextprotocol/sdk.
// Accepts gitea-mcp's CLI (`-t stdio -host URL`) and exposes the old and new comment tool names:
//   create_issue_comment {owner, repo, index, body}
//   issue_write {method:"add_comment", owner, repo, issue_number|index, body}
// Every call is appended (JSON line) to $STUB_MCP_LOG; the token itself is never written, only
// whether it was present (`tokenPresent`) and its length.
import { appendFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const logFile = process.env.STUB_MCP_LOG;
const hostIdx = process.argv.indexOf('-host');
const host = hostIdx >= 0 ? process.argv[hostIdx + 1] : null;
let commentSeq = 1000;

function log(entry: Record<string, unknown>): void {
  if (!logFile) return;
  const token = process.env.GITEA_ACCESS_TOKEN ?? '';
  appendFileSync(
    logFile,
    `${JSON.stringify({ at: Date.now(), pid: process.pid, host, envHost: process.env.GITEA_HOST ?? null, tokenPresent: token.length > 0, tokenLength: token.length, ...entry })}\n`,
  );
}

if (process.env.STUB_MCP_MODE === 'exit') process.exit(3);
// Test hygiene: Codex starts MCP servers in their own process groups, so a SIGKILLed app-server can
// leave them behind; exit as soon as we are orphaned (or stdin ends).
const parentPid = process.ppid;
setInterval(() => {
  if (process.ppid !== parentPid) process.exit(0);
}, 250).unref();
if (process.env.STUB_MCP_MODE === 'hang') {
  // Never answers initialize.
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
  setInterval(() => undefined, 1 << 30);
} else {
  const server = new McpServer({ name: 'gitea-mcp-stub', version: '0.0.1' });
  const reply = (owner: string, repo: string, index: number, body: string) => {
    const id = ++commentSeq;
    return {
      content: [{ type: 'text' as const, text: JSON.stringify({ id, html_url: `${host ?? 'http://gitea'}/${owner}/${repo}/issues/${index}#issuecomment-${id}`, body }) }],
    };
  };
  server.registerTool(
    'create_issue_comment',
    {
      description: 'Create a comment on an issue or pull request',
      inputSchema: { owner: z.string(), repo: z.string(), index: z.number().int(), body: z.string() },
    },
    async ({ owner, repo, index, body }) => {
      log({ tool: 'create_issue_comment', arguments: { owner, repo, index, body } });
      return reply(owner, repo, index, body);
    },
  );
  server.registerTool(
    'issue_write',
    {
      description: 'Write operations on issues (method: add_comment, ...)',
      inputSchema: {
        method: z.string(),
        owner: z.string(),
        repo: z.string(),
        issue_number: z.number().int().optional(),
        index: z.number().int().optional(),
        body: z.string().optional(),
      },
    },
    async (args) => {
      log({ tool: 'issue_write', arguments: args });
      return reply(args.owner, args.repo, args.issue_number ?? args.index ?? 0, args.body ?? '');
    },
  );
  log({ event: 'started' });
  await server.connect(new StdioServerTransport());
  process.stdin.on('end', () => process.exit(0));
}
