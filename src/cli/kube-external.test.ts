import { describe, expect, it } from 'vitest';
import { clusterService, viaLoopback } from './kube-external.ts';

describe('an external store inside the cluster', () => {
  it("a URL naming a Service (`<svc>.<ns>.svc`, with or without the cluster's domain) is reached through it", () => {
    expect(clusterService('redis://pup:pw@redis.stores.svc:6380', 6379)).toEqual({
      service: 'redis',
      namespace: 'stores',
      port: 6380,
    });
    expect(clusterService('postgresql://app:pw@pg-rw.db.svc.cluster.local/app', 5432)).toEqual({
      service: 'pg-rw',
      namespace: 'db',
      port: 5432,
    });
  });

  it('any other host is outside the cluster: used at its own URL', () => {
    for (const url of [
      'redis://redis.example.com:6379',
      'redis://10.0.0.7:6379',
      'redis://redis:6379',
      'postgresql://db.svc.example.com/app',
      'not a url',
    ])
      expect(clusterService(url, 6379), url).toBeUndefined();
  });

  it('the loopback URL keeps the credentials, the database and the query', () => {
    expect(viaLoopback('postgresql://app:p%2Fw@pg-rw.db.svc:5432/app?sslmode=require', 41234)).toBe(
      'postgresql://app:p%2Fw@127.0.0.1:41234/app?sslmode=require',
    );
    expect(viaLoopback('rediss://admin:pw@redis.stores.svc:6379', 5000)).toBe(
      'rediss://admin:pw@127.0.0.1:5000',
    );
  });
});
