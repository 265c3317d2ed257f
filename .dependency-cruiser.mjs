// The walls between the parts, checked by dependency-cruiser. Read by
// `npm run lint:walls` (its CLI) and by test/unit/architecture-walls.test.ts (its API), so
// `npm test` fails on a breach. Paths are relative to the repository root; every rule looks at
// direct imports, type-only ones included (`tsPreCompilationDeps`: an `import type` ties two
// parts together as much as a value import does). What these rules cannot state — no cycle between
// folders, the arrows src/README.md states — scripts/folder-walls.mjs computes from the same cruise
// (`npm run lint:walls` runs it after depcruise; the wall test calls it).

/** An npm package, wherever node_modules sits (a worktree may link to another checkout's). */
const pkg = (name) => `(^|/)node_modules/${name}/`;

/** The platform's folders (src/README.md, "Platform"), as a path group. */
const PLATFORM = '(store|data-dir|runtime|domain|config|gitea|http)';

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'machines-only-xstate',
      comment:
        'machines/ holds pure statecharts: they import xstate and each other, nothing else (no node, no src/), ' +
        'so a machine can be read, tested and visualised without the service.',
      severity: 'error',
      from: { path: '^machines/' },
      to: { pathNot: [`^machines/`, pkg('xstate')] },
    },
    {
      name: 'store-only-itself-node-engines',
      comment:
        'src/store/ is the platform under everything: it imports itself, the data directory\'s lock (src/data-dir/), ' +
        'node builtins, better-sqlite3 (the SQLite engine) and pg (the PostgreSQL engine) only, never the domain ' +
        'or the parts that use it.',
      severity: 'error',
      from: { path: '^src/store/' },
      to: { dependencyTypesNot: ['core'], pathNot: ['^src/store/', '^src/data-dir/', '^node:sqlite$', pkg('better-sqlite3'), pkg('pg'), pkg('pg-[a-z-]+')] },
    },
    {
      name: 'data-dir-only-node',
      comment: 'src/data-dir/ (one live process per data directory) imports node builtins only: the store and the service both stand on it.',
      severity: 'error',
      from: { path: '^src/data-dir/' },
      to: { dependencyTypesNot: ['core'], pathNot: '^src/data-dir/' },
    },
    {
      name: 'visualizer-graph-only-xstate-elkjs-machines',
      comment:
        'visualizer/graph/ turns a machine definition into a graph and a layout, for the service (GET /machines) and the ' +
        'exports alike: it imports xstate, elkjs, machines/ and itself, nothing else (no node, no src/), so it runs anywhere.',
      severity: 'error',
      from: { path: '^visualizer/graph/' },
      to: { pathNot: ['^visualizer/graph/', '^machines/', pkg('xstate'), pkg('elkjs')] },
    },
    {
      name: 'nothing-below-imports-visualizer',
      comment:
        'The visualizer draws the machines and reads the store through the API; machines/ and src/store/ sit below it ' +
        'and never import it.',
      severity: 'error',
      from: { path: '^(machines|src/store)/' },
      to: { path: '^visualizer/' },
    },
    {
      name: 'platform-imports-no-part',
      comment:
        'The platform (src/store/, data-dir/, runtime/, domain/, config/, gitea/, http/) is what every part stands on: it imports ' +
        'itself (its folders may import each other; no folder cycle: scripts/folder-walls.mjs), node and packages, ' +
        'never a part (another src/ folder, src/main.ts, the visualizer). A piece a part and the platform both need ' +
        'belongs to the platform (domain/ for pure record types and helpers).',
      severity: 'error',
      from: { path: `^src/${PLATFORM}/` },
      to: { path: ['^src/', '^visualizer/'], pathNot: `^src/${PLATFORM}/` },
    },
    {
      name: 'platform-machines-types-only',
      comment:
        'machines/ is below the platform (pure statecharts that import only xstate), and the one owner of each ' +
        "machine's states: the platform may name them (domain/records.ts types a task's state by the task machine's " +
        'TaskState) but never run machine code: `import type` only.',
      severity: 'error',
      from: { path: `^src/${PLATFORM}/` },
      to: { path: '^machines/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'intake-not-execution',
      comment:
        'Intake (src/webhook/, src/intake/) decides whether a comment becomes a task and writes it; it must not reach into ' +
        'Codex/sessions, workspaces, the scheduler or the executor. Shared pure helpers live in src/domain/.',
      severity: 'error',
      from: { path: '^src/(intake|webhook)/' },
      to: { path: '^src/(codex|sessions|workspace|scheduler|executor)/' },
    },
    {
      name: 'codex-not-intake',
      comment: 'Codex and sessions run tasks; they never call back into intake.',
      severity: 'error',
      from: { path: '^src/(codex|sessions)/' },
      to: { path: '^src/intake/' },
    },
    {
      name: 'api-not-codex',
      comment: 'The control API reads the store and the runtime; Codex internals (src/codex/) stay behind the sessions.',
      severity: 'error',
      from: { path: '^src/api/' },
      to: { path: '^src/codex/' },
    },
    {
      name: 'mcp-gate-only-itself-node',
      comment:
        'src/mcp-gate/ runs in its own process between Codex and gitea-mcp, holding the token: it imports itself, node ' +
        'and (from a checkout, entry.mjs) tsx only, so it starts about as fast as Node and nothing of the service (store, ' +
        'config, logs) is in it. No MCP SDK, zod or ajv: their loading would be most of a thread start.',
      severity: 'error',
      from: { path: '^src/mcp-gate/' },
      to: { dependencyTypesNot: ['core'], pathNot: ['^src/mcp-gate/', pkg('tsx')] },
    },
    {
      name: 'nothing-ships-test-code',
      comment:
        'What ships (src/, machines/, visualizer/) never imports test/: the image leaves test/ out, and a part that ' +
        'needs a piece of it (the demo\'s sandbox) has that piece moved into src/ (src/demo/), the tests importing it from there.',
      severity: 'error',
      from: { path: '^(src|machines|visualizer)/' },
      to: { path: '^test/' },
    },
    {
      name: 'demo-only-under-cli',
      comment:
        'src/demo/ is the world `demo` runs the service in (a real or a double Gitea, a scripted model): only the CLI ' +
        'starts it; no part of the service imports it.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(demo|cli)/' },
      to: { path: '^src/demo/' },
    },
    {
      name: 'demo-imports-no-part',
      comment:
        'src/demo/ stands for what is around the service (Gitea, the model); it imports itself, node, packages and the ' +
        'install scripts, never the service\'s own code, so its Gitea double cannot agree with the service by sharing it.',
      severity: 'error',
      from: { path: '^src/demo/' },
      to: { path: '^(src|machines|visualizer)/', pathNot: '^src/demo/' },
    },
    {
      name: 'no-runtime-cycle',
      comment:
        'No import cycle that exists at run time (a module half-initialised when its partner reads it). ' +
        'Cycles closed only by an `import type` are erased by the compiler and allowed: one exists ' +
        '(config/keys <-> config/limit-keys).',
      severity: 'error',
      from: {},
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
    {
      name: 'resolvable',
      comment:
        'Every import must resolve: an import the cruiser cannot follow would pass every wall unseen. ' +
        'Except in the visualizer page, which runs in the browser and imports the admin page\'s client by its URL ' +
        '(/admin/operator-client.js, served by src/api/static-pages.ts); and node:sqlite, a builtin of Node 22.13 ' +
        'and later that the Node the cruiser may run on (20) does not know (src/store/sql/sqlite-driver.ts).',
      severity: 'error',
      from: { pathNot: '^visualizer/page/' },
      to: { couldNotResolve: true, pathNot: '^node:sqlite$' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // Resolve packages as Node's ESM loader and tsc (NodeNext) do: through their `exports`
    // (lowdb and the MCP SDK have nothing else), `types` for the type-only imports.
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'node', 'default', 'types'],
    },
  },
};
