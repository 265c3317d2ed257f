// Gitea test double, part one: git's smart HTTP protocol on 127.0.0.1, served by the real
// `git http-backend` CGI over bare repositories at `root/<owner>/<repo>.git`, behind Gitea-style
// token auth (`Authorization: token|Bearer <t>`, or Basic with the token as password or username).
// `refs/pull/<N>/head` are real refs in the bare repositories, as in Gitea.
//
// The request handler is exported on its own so REST routes can share the server later:
// `handleGitRequest(req, res)` returns false for any path that is not a git path.
import { spawn } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';

import { FixtureRepos, type FileTree, type PullRequestSource } from './git-fixture-repos.js';

export type { FileTree, PullRequestSource } from './git-fixture-repos.js';

export interface GitRequestLogEntry {
  method: string;
  /** Path only; query kept apart. No header values are ever logged. */
  path: string;
  query: string;
  owner: string;
  repo: string;
  service: string;
  authScheme: 'token' | 'bearer' | 'basic' | 'none' | 'other';
  authorized: boolean;
  status: number;
}

export interface GitHandlerOptions {
  /** Directory holding `<owner>/<repo>.git`. */
  root: string;
  /** The only token accepted. */
  token: string;
  /** The request log to append to (shared with the server object). */
  requests?: GitRequestLogEntry[];
  /** `owner/repo` keys whose requests are accepted and then never answered (timeout tests). */
  hang?: Set<string>;
}

export type GitRequestHandler = (req: IncomingMessage, res: ServerResponse) => boolean;

// `/<owner>/<repo>.git/<endpoint>`; Gitea also accepts the path without `.git`.
const GIT_PATH = /^\/([A-Za-z0-9_][A-Za-z0-9_.-]*)\/([A-Za-z0-9_][A-Za-z0-9_.-]*?)(?:\.git)?\/(info\/refs|git-upload-pack|git-receive-pack)$/;

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function checkAuth(header: string | undefined, token: string): { scheme: GitRequestLogEntry['authScheme']; ok: boolean } {
  if (!header) return { scheme: 'none', ok: false };
  const space = header.indexOf(' ');
  const scheme = (space < 0 ? header : header.slice(0, space)).toLowerCase();
  const value = space < 0 ? '' : header.slice(space + 1).trim();
  if (scheme === 'token') return { scheme: 'token', ok: safeEqual(value, token) };
  if (scheme === 'bearer') return { scheme: 'bearer', ok: safeEqual(value, token) };
  if (scheme === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const user = colon < 0 ? decoded : decoded.slice(0, colon);
    const pass = colon < 0 ? '' : decoded.slice(colon + 1);
    const ok = safeEqual(pass, token) || (safeEqual(user, token) && (pass === '' || pass === 'x-oauth-basic'));
    return { scheme: 'basic', ok };
  }
  return { scheme: 'other', ok: false };
}

export function createGitRequestHandler(options: GitHandlerOptions): GitRequestHandler {
  const requests = options.requests ?? [];
  return (req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const match = GIT_PATH.exec(url.pathname);
    if (!match) return false;
    const [, owner = '', repo = '', endpoint = ''] = match;
    const service = endpoint === 'info/refs' ? (url.searchParams.get('service') ?? '') : endpoint;
    const auth = checkAuth(req.headers.authorization, options.token);
    const entry: GitRequestLogEntry = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: url.search,
      owner,
      repo,
      service,
      authScheme: auth.scheme,
      authorized: auth.ok,
      status: 0,
    };
    requests.push(entry);
    const finish = (status: number, headers: Record<string, string>, body: string): void => {
      entry.status = status;
      req.resume();
      res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', ...headers });
      res.end(body);
    };
    if (owner.includes('..') || repo.includes('..')) {
      finish(404, {}, 'Not found\n');
      return true;
    }
    if (!auth.ok) {
      finish(401, { 'WWW-Authenticate': 'Basic realm="Gitea"' }, 'Unauthorized\n');
      return true;
    }
    if (!existsSync(path.join(options.root, owner, `${repo}.git`))) {
      finish(404, {}, 'Not found\n');
      return true;
    }
    if (options.hang?.has(`${owner}/${repo}`)) {
      entry.status = -1; // Accepted and never answered.
      return true;
    }
    runHttpBackend(req, res, options.root, `/${owner}/${repo}.git/${endpoint}`, url.search.replace(/^\?/, ''), entry);
    return true;
  };
}

function runHttpBackend(
  req: IncomingMessage,
  res: ServerResponse,
  root: string,
  pathInfo: string,
  query: string,
  entry: GitRequestLogEntry,
): void {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    GIT_CONFIG_NOSYSTEM: '1',
    HOME: root,
    GIT_PROJECT_ROOT: root,
    GIT_HTTP_EXPORT_ALL: '1',
    PATH_INFO: pathInfo,
    QUERY_STRING: query,
    REQUEST_METHOD: req.method ?? 'GET',
    REMOTE_ADDR: req.socket.remoteAddress ?? '127.0.0.1',
    // An authenticated user: lets http-backend accept receive-pack (pushes) too.
    REMOTE_USER: 'gitea-double',
    GATEWAY_INTERFACE: 'CGI/1.1',
    SERVER_PROTOCOL: `HTTP/${req.httpVersion}`,
  };
  const contentType = req.headers['content-type'];
  if (contentType) env.CONTENT_TYPE = contentType;
  const contentLength = req.headers['content-length'];
  if (contentLength) env.CONTENT_LENGTH = contentLength;
  const encoding = req.headers['content-encoding'];
  if (typeof encoding === 'string') env.HTTP_CONTENT_ENCODING = encoding;
  const protocol = req.headers['git-protocol'];
  if (typeof protocol === 'string') env.GIT_PROTOCOL = protocol;

  const child = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr += chunk;
  });
  child.stdin.on('error', () => undefined);
  req.pipe(child.stdin);
  req.on('aborted', () => child.kill('SIGKILL'));
  res.on('close', () => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  let head = Buffer.alloc(0);
  let headersDone = false;
  child.stdout.on('data', (chunk: Buffer) => {
    if (headersDone) {
      res.write(chunk);
      return;
    }
    head = Buffer.concat([head, chunk]);
    let end = head.indexOf('\r\n\r\n');
    let sepLen = 4;
    const lf = head.indexOf('\n\n');
    if (lf >= 0 && (end < 0 || lf < end)) {
      end = lf;
      sepLen = 2;
    }
    if (end < 0) return;
    headersDone = true;
    let status = 200;
    const headers: Record<string, string> = {};
    for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim();
      const value = line.slice(colon + 1).trim();
      if (name.toLowerCase() === 'status') status = Number.parseInt(value, 10) || 500;
      else headers[name] = value;
    }
    entry.status = status;
    res.writeHead(status, headers);
    const rest = head.subarray(end + sepLen);
    if (rest.length > 0) res.write(rest);
  });
  child.on('close', (code) => {
    if (!headersDone) {
      entry.status = 500;
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(`git http-backend failed (${code}): ${stderr.slice(0, 500)}\n`);
      return;
    }
    res.end();
  });
  child.on('error', (error) => {
    entry.status = 500;
    if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
    res.end(`cannot run git http-backend: ${error.message}\n`);
  });
}

export interface StartGitHttpOptions {
  root: string;
  token: string;
  /** 0 (default) picks a free port. Always bound to 127.0.0.1. */
  port?: number;
  /** Called for non-git paths; default answers 404. */
  fallback?: (req: IncomingMessage, res: ServerResponse) => void;
}

export interface GitHttpServer {
  /** `http://127.0.0.1:<port>` (no trailing slash). */
  url: string;
  port: number;
  root: string;
  server: http.Server;
  handleGitRequest: GitRequestHandler;
  requests: GitRequestLogEntry[];
  /** `owner/repo` keys that hang (accepted, never answered). */
  hang: Set<string>;
  repos: FixtureRepos;
  cloneUrl(owner: string, repo: string): string;
  createRepo(
    owner: string,
    repo: string,
    options?: { files?: FileTree; defaultBranch?: string },
  ): Promise<{ cloneUrl: string; head: string; defaultBranch: string }>;
  pushCommit(owner: string, repo: string, branch: string, files: FileTree, message?: string): Promise<string>;
  createPullRequestRef(owner: string, repo: string, number: number, source: PullRequestSource): Promise<string>;
  close(): Promise<void>;
}

export async function startGitHttpServer(options: StartGitHttpOptions): Promise<GitHttpServer> {
  await mkdir(options.root, { recursive: true });
  const requests: GitRequestLogEntry[] = [];
  const hang = new Set<string>();
  const handleGitRequest = createGitRequestHandler({ root: options.root, token: options.token, requests, hang });
  const fallback =
    options.fallback ??
    ((_req: IncomingMessage, res: ServerResponse) => {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('Not found\n');
    });
  const sockets = new Set<Socket>();
  const server = http.createServer((req, res) => {
    if (!handleGitRequest(req, res)) fallback(req, res);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  const repos = new FixtureRepos(options.root);
  const cloneUrl = (owner: string, repo: string): string => `${url}/${owner}/${repo}.git`;
  return {
    url,
    port,
    root: options.root,
    server,
    handleGitRequest,
    requests,
    hang,
    repos,
    cloneUrl,
    async createRepo(owner, repo, opts = {}) {
      const created = await repos.createRepo(owner, repo, opts);
      return { cloneUrl: cloneUrl(owner, repo), head: created.head, defaultBranch: created.defaultBranch };
    },
    pushCommit: (owner, repo, branch, files, message) => repos.pushCommit(owner, repo, branch, files, message),
    createPullRequestRef: (owner, repo, number, source) => repos.createPullRequestRef(owner, repo, number, source),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await repos.dispose();
    },
  };
}
