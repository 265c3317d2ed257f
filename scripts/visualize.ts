// `npm run visualize [outDir]`: writes every machine's Stately code, Mermaid and SVG exports.
import { fileURLToPath } from 'node:url';
import { relative, resolve } from 'node:path';
import { writeExports } from '../visualizer/export-machines.js';

const root = resolve(fileURLToPath(new URL('..', import.meta.url)));
const outDir = resolve(process.argv[2] ?? resolve(root, 'visualizer/exports'));
for (const file of await writeExports(outDir)) console.log(relative(process.cwd(), file));
