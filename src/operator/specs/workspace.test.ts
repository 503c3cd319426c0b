import { describe, expect, it } from 'vitest';
import { HoltSpec } from '../../api/holt.ts';
import type { Owner } from './meta.ts';
import { WORKSPACE_LABEL, waitForSeed, workspaceAffinity, workspaceSeedJob } from './workspace.ts';

const owner: Owner = { apiVersion: 'holt.io/v1alpha1', kind: 'Holt', name: 'h', namespace: 'ns', uid: 'u' };
type Job = {
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    template: {
      spec: {
        containers: { env: { name: string; value?: string }[]; command: string[] }[];
        volumes: object[];
      };
    };
  };
};

describe('the workspace seed', () => {
  it('is no Job and no wait without gitUrl', () => {
    const spec = HoltSpec.parse({});
    expect(workspaceSeedJob(owner, spec, 'runtime:1')).toBeUndefined();
    expect(waitForSeed(spec.workspace, 'runtime:1')).toEqual([]);
  });

  it('clones gitUrl with the Secret mounted as files: the credentials are never in the URL, env or argv', () => {
    const spec = HoltSpec.parse({
      workspace: { gitUrl: 'https://git.example/repo.git', gitSecretRef: { name: 'creds' } },
    });
    const job = workspaceSeedJob(owner, spec, 'runtime:1') as unknown as Job;
    const c = job.spec.template.spec.containers[0]!;
    expect(c.env.find((e) => e.name === 'HOLT_GIT_URL')?.value).toBe('https://git.example/repo.git');
    expect(JSON.stringify(c.env)).not.toMatch(/password|secretKeyRef/);
    expect(job.spec.template.spec.volumes).toContainEqual({
      name: 'git-credentials',
      secret: { secretName: 'creds', defaultMode: 0o440 },
    });
    expect(c.command.join(' ')).toContain('GIT_ASKPASS');
    expect(job.metadata.labels[WORKSPACE_LABEL]).toBe('h');
    // Another URL is another Job (a Job's template cannot change).
    const other = workspaceSeedJob(
      owner,
      HoltSpec.parse({ workspace: { gitUrl: 'https://git.example/other.git' } }),
      'runtime:1',
    );
    expect(other?.metadata.name).not.toBe(job.metadata.name);
    expect(waitForSeed(spec.workspace, 'runtime:1')[0]?.command?.join(' ')).toContain('/workspace/.git');
  });
});

describe('workspaceAffinity', () => {
  it('keeps every pod of a ReadWriteOnce workspace on one node', () => {
    const a = workspaceAffinity('h', HoltSpec.parse({}).workspace, { app: 'pool' });
    expect(a?.podAffinity?.requiredDuringSchedulingIgnoredDuringExecution).toEqual([
      { labelSelector: { matchLabels: { [WORKSPACE_LABEL]: 'h' } }, topologyKey: 'kubernetes.io/hostname' },
    ]);
    expect(a?.podAntiAffinity).toBeUndefined();
  });

  it('spreads the workers of a ReadWriteMany workspace over nodes, and leaves other pods free', () => {
    const ws = HoltSpec.parse({ workspace: { accessMode: 'ReadWriteMany' } }).workspace;
    expect(workspaceAffinity('h', ws)).toBeUndefined();
    const a = workspaceAffinity('h', ws, { app: 'pool' });
    expect(a?.podAffinity).toBeUndefined();
    expect(a?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution?.[0]?.podAffinityTerm).toEqual(
      {
        labelSelector: { matchLabels: { app: 'pool' } },
        topologyKey: 'kubernetes.io/hostname',
      },
    );
  });
});
