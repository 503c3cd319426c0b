// An in-cluster Git server for the e2e (runs on the runtime image, which has node and git): smart
// HTTP through `git http-backend`, behind basic auth from $GIT_USER / $GIT_PASSWORD. At start it
// makes /srv/git/<repo>.git for every name in $GIT_REPOS, each with one commit "seed": a README and
// the files under /srv/app/seed/<repo>/ when there are any.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';

const ROOT = '/srv/git';
const { GIT_USER = '', GIT_PASSWORD = '', GIT_REPOS = 'demo', PORT = '8080' } = process.env;
const expected = `Basic ${Buffer.from(`${GIT_USER}:${GIT_PASSWORD}`).toString('base64')}`;
const git = (cwd, ...args) => execFileSync('git', args, { cwd, encoding: 'utf8' });

for (const repo of GIT_REPOS.split(',').filter(Boolean)) {
  const bare = join(ROOT, `${repo}.git`);
  mkdirSync(bare, { recursive: true });
  git(bare, 'init', '-q', '--bare', '-b', 'main');
  git(bare, 'config', 'http.receivepack', 'true');
  const work = mkdtempSync('/tmp/seed-');
  git(work, 'init', '-q', '-b', 'main');
  writeFileSync(join(work, 'README.md'), `# ${repo}\n\nSeeded by the e2e git server.\n`);
  const seed = join('/srv/app/seed', repo);
  if (existsSync(seed)) cpSync(seed, work, { recursive: true, dereference: true });
  git(work, 'add', '-A');
  git(work, '-c', 'user.name=e2e', '-c', 'user.email=e2e@holt.local', 'commit', '-q', '-m', 'seed');
  git(work, 'push', '-q', bare, 'main');
}

createServer((req, res) => {
  if (req.url === '/healthz') return res.end('ok');
  if (req.headers.authorization !== expected) {
    res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' });
    return res.end('authentication required\n');
  }
  const url = new URL(req.url ?? '/', 'http://git');
  const cgi = spawn('git', ['http-backend'], {
    env: {
      ...process.env,
      GIT_PROJECT_ROOT: ROOT,
      GIT_HTTP_EXPORT_ALL: '1',
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
      REMOTE_USER: GIT_USER,
      REMOTE_ADDR: req.socket.remoteAddress ?? '',
    },
  });
  req.pipe(cgi.stdin);
  // CGI output: headers, a blank line, the body.
  let head = Buffer.alloc(0);
  let started = false;
  cgi.stdout.on('data', (chunk) => {
    if (started) return res.write(chunk);
    head = Buffer.concat([head, chunk]);
    const end = head.indexOf('\r\n\r\n');
    if (end < 0) return;
    started = true;
    const headers = {};
    let status = 200;
    for (const line of head.subarray(0, end).toString().split('\r\n')) {
      const i = line.indexOf(':');
      const k = line.slice(0, i).trim();
      const v = line.slice(i + 1).trim();
      if (k.toLowerCase() === 'status') status = Number.parseInt(v, 10);
      else headers[k] = v;
    }
    res.writeHead(status, headers);
    res.write(head.subarray(end + 4));
  });
  cgi.stdout.on('end', () => res.end());
  cgi.stderr.on('data', (d) => process.stderr.write(d));
}).listen(Number(PORT), () => console.log(`git server on :${PORT}, repos: ${GIT_REPOS}`));
