import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../kube/kube.ts';
import { logOfRun, podDeaths, scrubLog } from './workerexits.ts';

const pod = (containerStatuses: unknown[], labels = { 'holt.io/instance': 'dev', 'holt.io/role': 'Coder' }) =>
  ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'coder-workers-abc', namespace: 'team', uid: 'u1', labels },
    status: { containerStatuses },
  }) as KubeObject;

describe("a worker pod's dead pup, read from its status", () => {
  it('reports a non-zero exit now and the one before a restart, once each, never a clean stop', () => {
    const deaths = podDeaths(
      pod([
        { name: 'agent', state: { terminated: { exitCode: 1, finishedAt: '2026-11-25T10:00:00Z' } } },
        {
          name: 'pup',
          state: { running: {} },
          lastState: {
            terminated: { exitCode: 137, reason: 'OOMKilled', finishedAt: '2026-11-25T10:00:01Z' },
          },
        },
      ]),
    );
    expect(deaths).toEqual([
      {
        key: 'u1/2026-11-25T10:00:01Z/137',
        holt: { namespace: 'team', name: 'dev' },
        exit: {
          owner: 'coder-workers-abc',
          role: 'Coder',
          exit_code: 137,
          reason: 'OOMKilled',
          at_ms: Date.parse('2026-11-25T10:00:01Z') + 999,
        },
        previous: true,
        finishedAt: '2026-11-25T10:00:01Z',
      },
    ]);
    const now = podDeaths(
      pod([{ name: 'pup', state: { terminated: { exitCode: 2, finishedAt: '2026-11-25T10:00:02Z' } } }]),
    );
    expect(now.map((d) => [d.exit.exit_code, d.previous])).toEqual([[2, false]]);
    expect(
      podDeaths(pod([{ name: 'pup', state: { terminated: { exitCode: 0, finishedAt: 'x' } } }])),
    ).toEqual([]);
    expect(podDeaths(pod([{ name: 'pup', state: { terminated: { exitCode: 9 } } }]))).toEqual([]);
    expect(
      podDeaths(pod([{ name: 'pup', state: { terminated: { exitCode: 9, finishedAt: 'x' } } }], {} as never)),
    ).toEqual([]);
  });

  it("finds a dead run's log as the pod is now: current before the restart, previous after one, none after two", () => {
    const at = '2026-11-25T10:00:01Z';
    const dead = { exitCode: 137, finishedAt: at };
    expect(logOfRun(pod([{ name: 'pup', state: { terminated: dead } }]), at)).toBe('current');
    expect(
      logOfRun(pod([{ name: 'pup', state: { running: {} }, lastState: { terminated: dead } }]), at),
    ).toBe('previous');
    const later = { exitCode: 1, finishedAt: '2026-11-25T10:00:09Z' };
    expect(
      logOfRun(pod([{ name: 'pup', state: { running: {} }, lastState: { terminated: later } }]), at),
    ).toBe(undefined);
  });

  it('cuts credentials out of URLs in the log', () => {
    expect(
      scrubLog('dial redis://pup:hunter2-secret@redis:6379 and postgres://app:pw@db/x, http://host/path'),
    ).toBe('dial redis://pup:[redacted]@redis:6379 and postgres://app:[redacted]@db/x, http://host/path');
  });
});
