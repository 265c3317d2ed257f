#!/usr/bin/env node
// The `ccweb-gitea` command: runs the TypeScript CLI (src/cli/index.ts) through tsx's ESM loader,
// so the installed package needs no build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli/index.ts');
await main(process.argv.slice(2));
