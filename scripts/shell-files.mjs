// The files the service worker keeps for offline use, as scripts/shell-list.mjs wrote them in
// pkg/shell.js (paths from www/: `./`, www/'s own, and `../pkg/…`), for what reads the list
// outside the worker (tests/browser/perf.mjs, scripts/build-extension.sh).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export function shellFiles(root) {
  const text = readFileSync(join(root, 'pkg/shell.js'), 'utf8');
  return JSON.parse(text.slice(text.indexOf('{'), text.lastIndexOf('}') + 1)).files;
}
