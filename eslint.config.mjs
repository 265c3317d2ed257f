// Type-aware promise rules only: a promise in the service's code is awaited, returned, or marked
// `void` on purpose, and an async function is not handed where nobody waits for it (`forEach(async
// …)`). A store transaction's body that starts a write without awaiting it commits without that write
// (the store's contract: bodies await every tx operation), and nothing else would say so.
import tseslint from 'typescript-eslint';

export default tseslint.config({
  files: ['src/**/*.ts', 'machines/**/*.ts', 'visualizer/**/*.ts'],
  ignores: ['src/codex/protocol/**', 'src/gitea/generated/**'],
  languageOptions: { parser: tseslint.parser, parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
  // The code keeps a few directives for rules this config does not run (no-control-regex…).
  linterOptions: { reportUnusedDisableDirectives: 'off' },
  plugins: { '@typescript-eslint': tseslint.plugin },
  rules: {
    '@typescript-eslint/no-floating-promises': 'error',
    '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: true, checksConditionals: false, checksSpreads: false }],
  },
});
