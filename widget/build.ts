// Part of `npm run build`: bundles the webchat widget next to the compiled service, where
// GET /widget.js serves it from, and prints its size.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { bundle } from '../src/channels/webchat/widget-script.js';

const out = path.resolve('dist/channels/webchat/widget.js');
const body = await bundle(out);
await mkdir(path.dirname(out), { recursive: true });
await writeFile(out, body);
const gz = gzipSync(body, { level: 9 }).length;
process.stdout.write(
  `widget: ${path.relative(process.cwd(), out)} ${(body.length / 1024).toFixed(1)} KiB, ${(gz / 1024).toFixed(1)} KiB gzipped\n`,
);
