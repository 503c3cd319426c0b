import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalToolRunner, WorkspaceMappedRunner } from '../pup/runner/runner.ts';
import { containerLimits } from './engine.ts';
import { containerRunArgs, readOnlyRunnerArgs, toolsPlan, toolVariables } from './tools.ts';

describe('where a local agent runs its tools', () => {
  it('in its image when containers are on, else on this machine (read-only view for ro)', () => {
    expect(toolsPlan('img:1', 'ro', true)).toEqual({ kind: 'container', image: 'img:1' });
    expect(toolsPlan('img:1', 'rw', false)).toEqual({ kind: 'host' });
    expect(toolsPlan('img:1', 'ro', false)).toEqual({ kind: 'readonly' });
    expect(toolsPlan(undefined, 'ro', true)).toEqual({ kind: 'readonly' });
    expect(toolsPlan(undefined, 'rw', true)).toEqual({ kind: 'host' });
  });

  it('gives the tools the contract and declared variables only, never a credential', () => {
    const vars = toolVariables(
      {
        HOLT_INSTANCE_NAME: 'i',
        HOLT_AGENT_NAME: 'Coder',
        HOLT_WORKSPACE: '/home/me/repo',
        HOLT_TOOL_ENV: '["GREETING"]',
        GREETING: 'hi',
        HOLT_AGENT_COMMAND: '["x"]',
        REDIS_URL: 'redis://u:p@h',
        HOLT_LLM_API_KEY: 'sk-1',
      },
      '/workspace',
    );
    expect(vars).toEqual({
      HOLT_INSTANCE_NAME: 'i',
      HOLT_AGENT_NAME: 'Coder',
      HOLT_WORKSPACE: '/workspace',
      HOLT_TOOL_ENV: '["GREETING"]',
      GREETING: 'hi',
    });
  });

  it('runs the container read-only where the file says, with no value in its argv', () => {
    const args = containerRunArgs({
      instance: 'dev',
      component: 'Coder',
      role: 'Coder',
      image: 'coder:1',
      workspace: '/home/me/repo',
      mode: 'ro',
      runDir: '/tmp/holt-0/ab/Coder',
      bundleVolume: 'holt-bundle-1',
      network: 'holt-dev',
      variables: ['GREETING'],
      user: '1000:1000',
      limits: { memory: '4g', pids: 4096 },
    });
    expect(args.join(' ')).toBe(
      'run --rm --name holt-dev-Coder --label holt.instance=dev --label holt.role=Coder --network holt-dev --user 1000:1000 --cap-drop ALL --security-opt no-new-privileges --read-only -v /tmp --pids-limit 4096 --memory 4g -v holt-bundle-1:/opt/holt:ro -v /home/me/repo:/workspace:ro -v /tmp/holt-0/ab/Coder:/run/holt -w /workspace -e GREETING --entrypoint /opt/holt/bin/holt coder:1 tool-runner --socket /run/holt/runner.sock',
    );
    const rw = containerRunArgs({
      ...{ instance: 'dev', component: 'C', role: 'C', image: 'c', workspace: '/w', runDir: '/r' },
      ...{ mode: 'rw', bundleVolume: 'b', network: 'n', variables: [], limits: { memory: '1g', pids: 64 } },
    });
    expect(rw).toContain('/w:/workspace');
    expect(rw).not.toContain('--user');
  });

  it("the containers' memory and process limits: defaults, the environment's, a bad value refused", () => {
    expect(containerLimits({})).toEqual({ memory: '4g', pids: 4096 });
    expect(containerLimits({ HOLT_CONTAINER_MEMORY: '512m', HOLT_CONTAINER_PIDS: '256' })).toEqual({
      memory: '512m',
      pids: 256,
    });
    expect(() => containerLimits({ HOLT_CONTAINER_MEMORY: 'lots' })).toThrow(/HOLT_CONTAINER_MEMORY: a size/);
    expect(() => containerLimits({ HOLT_CONTAINER_PIDS: '0' })).toThrow(/HOLT_CONTAINER_PIDS/);
  });

  it.runIf(process.getuid?.() === 0)(
    'the read-only view refuses writes to the workspace, and only there',
    () => {
      const ws = mkdtempSync(join(tmpdir(), 'ro-ws-'));
      const other = mkdtempSync(join(tmpdir(), 'ro-other-'));
      try {
        const { command, args } = readOnlyRunnerArgs(
          ws,
          [
            'sh',
            '-c',
            'touch "$0/a" 2>/dev/null && echo ws-writable; touch "$1/b" && echo other-writable',
            ws,
            other,
          ],
          true,
        );
        expect(execFileSync(command, args).toString()).toBe('other-writable\n');
      } finally {
        rmSync(ws, { recursive: true, force: true });
        rmSync(other, { recursive: true, force: true });
      }
    },
  );

  it.runIf(process.getuid?.() === 0)(
    'a tool, root of its namespace, cannot unmount, remount or bind around the read-only view to write the workspace',
    () => {
      const ws = mkdtempSync(join(tmpdir(), 'ro-ws-'));
      const scratch = mkdtempSync(join(tmpdir(), 'ro-scratch-'));
      try {
        // Every way out a root tool has: unmount (plain and lazy), remount read-write, a writable
        // tmpfs over the view, and the root filesystem bound elsewhere without the view on it.
        const breakOut = [
          'ws=$0; s=$1',
          'umount "$ws"; umount -l "$ws"',
          'mount -o remount,rw "$ws"; mount -o remount,bind,rw "$ws"',
          'touch "$ws/after-umount"',
          'mkdir -p "$s/root" && mount --bind / "$s/root" && touch "$s/root$ws/via-root"',
          'mount -t tmpfs none "$ws" && touch "$ws/on-tmpfs"',
          'true',
        ].join('\n');
        const { command, args } = readOnlyRunnerArgs(ws, ['sh', '-c', breakOut, ws, scratch], true);
        execFileSync(command, args, { stdio: 'ignore' });
        // The tmpfs over the view was the tool's own namespace's: nothing reached the workspace.
        expect(readdirSync(ws)).toEqual([]);
      } finally {
        rmSync(ws, { recursive: true, force: true });
        rmSync(scratch, { recursive: true, force: true });
      }
    },
  );

  it('moves a run into the workspace as the runner sees it', async () => {
    const ws = mkdtempSync(join(tmpdir(), 'map-ws-'));
    try {
      writeFileSync(join(ws, 'x'), '');
      const seen: string[] = [];
      const inner = new LocalToolRunner(process.env);
      const spy = {
        run: (req: Parameters<typeof inner.run>[0]) => {
          seen.push(req.cwd);
          return inner.run({ ...req, cwd: ws });
        },
        ping: () => inner.ping(),
        file: (req: Parameters<typeof inner.file>[0]) => {
          seen.push(req.root);
          return inner.file({ ...req, root: ws });
        },
        commit: (req: Parameters<typeof inner.commit>[0]) => {
          seen.push(req.root);
          return inner.commit({ ...req, root: ws });
        },
      };
      const mapped = new WorkspaceMappedRunner(spy, '/home/me/repo/', '/workspace');
      expect(mapped.mapCwd('/home/me/repo')).toBe('/workspace');
      expect(mapped.mapCwd('/home/me/repo/sub/dir')).toBe('/workspace/sub/dir');
      expect(mapped.mapCwd('/home/me/repository')).toBe('/home/me/repository');
      const r = await mapped.run({
        argv: ['ls'],
        cwd: '/home/me/repo/sub',
        stdin: '',
        timeoutMs: 5000,
        maxBytes: 1000,
      });
      expect(seen).toEqual(['/workspace/sub']);
      expect(r.stdout).toBe('x\n');
      // A file operation's root is moved the same way.
      expect(await mapped.file({ op: 'list', root: '/home/me/repo' })).toMatchObject({ ok: true });
      expect(seen).toEqual(['/workspace/sub', '/workspace']);
      // And a commit check's (ws is no repository: the check says so, it does not throw).
      expect(await mapped.commit({ root: '/home/me/repo', rev: 'a'.repeat(40) })).toMatchObject({
        ok: false,
      });
      expect(seen).toEqual(['/workspace/sub', '/workspace', '/workspace']);
    } finally {
      rmSync(ws, { recursive: true, force: true });
    }
  });
});
