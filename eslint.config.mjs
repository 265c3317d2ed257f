// One rule, type-aware: a promise in the service's code is awaited, returned, or marked `void` on
// purpose. A store transaction's body that starts a write without awaiting it commits without that
// write (the store's contract: bodies await every tx operation), and nothing else would say so.
import tseslint from 'typescript-eslint';

export default tseslint.config({
  files: ['src/**/*.ts', 'machines/**/*.ts', 'visualizer/**/*.ts'],
  ignores: ['src/codex/protocol/**', 'src/gitea/generated/**'],
  languageOptions: { parser: tseslint.parser, parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
  linterOptions: { reportUnusedDisableDirectives: 'off' },
  plugins: { '@typescript-eslint': tseslint.plugin },
  rules: { '@typescript-eslint/no-floating-promises': 'error' },
});
