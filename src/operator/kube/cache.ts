import type { Informer } from './informer.ts';
import type { KubeObject } from './kube.ts';

/** Read access to the informers' caches, by kind: reconcilers read only from here, never GET. */
export class Cache {
  readonly informers = new Map<string, Informer>();

  add(inf: Informer): void {
    this.informers.set(inf.kind, inf);
  }

  get<T extends KubeObject = KubeObject>(kind: string, namespace: string, name: string): T | undefined {
    return this.informers.get(kind)?.get<T>(namespace, name);
  }

  list<T extends KubeObject = KubeObject>(kind: string, namespace?: string): T[] {
    return this.informers.get(kind)?.list<T>(namespace) ?? [];
  }

  /** Objects of a kind whose controller owner reference is `uid`. */
  owned(kind: string, namespace: string, uid: string): KubeObject[] {
    return this.list(kind, namespace).filter((o) =>
      o.metadata.ownerReferences?.some((r) => r.controller && r.uid === uid),
    );
  }

  get synced(): boolean {
    return [...this.informers.values()].every((i) => i.synced);
  }
}
