import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { APP_CSS, APP_JS, INDEX_HTML } from './app.ts';
import { LIFE_JS } from './life-app.ts';

/**
 * What the console's pages are made of, all served by the console itself (no CDN, no build step at
 * run time): Preact and its hooks from the runtime's own node_modules, the app, its style and the page.
 */

export interface Asset {
  body: Buffer;
  type: string;
}

const require = createRequire(import.meta.url);
const js = 'text/javascript; charset=utf-8';

/** A file of the Preact package (its exports map hides the browser builds' paths). */
function vendored(file: string, rewrite?: (s: string) => string): Buffer {
  const text = readFileSync(join(dirname(require.resolve('preact/package.json')), file), 'utf8');
  return Buffer.from(rewrite ? rewrite(text) : text);
}

/** Path → asset; read once. The hooks import Preact by its bare name: pointed at the served copy. */
export function consoleAssets(): Map<string, Asset> {
  return new Map<string, Asset>([
    ['/', { body: Buffer.from(INDEX_HTML), type: 'text/html; charset=utf-8' }],
    ['/assets/preact.js', { body: vendored('dist/preact.module.js'), type: js }],
    [
      '/assets/hooks.js',
      {
        body: vendored('hooks/dist/hooks.module.js', (s) =>
          s.replace(/from\s*"preact"/g, 'from"./preact.js"'),
        ),
        type: js,
      },
    ],
    ['/assets/app.js', { body: Buffer.from(APP_JS), type: js }],
    ['/assets/life.js', { body: Buffer.from(LIFE_JS), type: js }],
    ['/assets/app.css', { body: Buffer.from(APP_CSS), type: 'text/css; charset=utf-8' }],
  ]);
}

/** Bytes a first visit downloads (the page weight the closing note reports). */
export const pageWeight = (assets: Map<string, Asset>) =>
  [...assets.values()].reduce((n, a) => n + a.body.length, 0);
