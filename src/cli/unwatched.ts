import { AppsV1Api, type KubeConfig } from '@kubernetes/client-node';

/** A Holt operator Deployment as the chart makes it: where it runs and what it watches. */
export interface OperatorSeen {
  namespace: string;
  name: string;
  /** HOLT_OPERATOR_NAMESPACES: empty means every namespace (clusterWide). */
  watches: string[];
}

const CHART_LABEL = 'app.kubernetes.io/name=holt-operator';

/**
 * Why a Holt has no status yet, for a person (pure). `operators` is what the cluster showed of the
 * chart's operator Deployments, or undefined when they could not be read (RBAC): then the question
 * is asked instead of answered. Issue 29: a Holt in a namespace the operator does not watch sat
 * there with no status and nothing saying why.
 */
export function noStatusHint(namespace: string, name: string, operators: OperatorSeen[] | undefined): string {
  const what = `Holt ${namespace}/${name} has no status yet: no operator has reconciled it`;
  const fix = `add the namespace to the chart's watchNamespaces (helm upgrade <release> charts/holt-operator --reuse-values --set 'watchNamespaces={...,${namespace}}'), or install with clusterWide=true`;
  if (!operators) return `${what}. Is an operator watching namespace ${namespace}? If not, ${fix}.`;
  if (!operators.length)
    return `${what}: no Holt operator runs in this cluster (install charts/holt-operator; it watches only the namespaces it is given: ${fix}).`;
  const watching = operators.filter((o) => o.watches.length === 0 || o.watches.includes(namespace));
  if (watching.length)
    return `${what}, though ${watching.map((o) => `${o.namespace}/${o.name}`).join(', ')} watches namespace ${namespace}: see its log (kubectl logs -n ${watching[0]?.namespace} deploy/${watching[0]?.name}).`;
  const seen = operators.map((o) => `${o.namespace}/${o.name} watches ${o.watches.join(', ')}`).join('; ');
  return `${what}: namespace ${namespace} is not watched (${seen}). To run Holts there, ${fix}.`;
}

/** The chart's operator Deployments, or undefined when this user may not list Deployments everywhere. */
export async function findOperators(kc: KubeConfig): Promise<OperatorSeen[] | undefined> {
  try {
    const list = await kc
      .makeApiClient(AppsV1Api)
      .listDeploymentForAllNamespaces({ labelSelector: CHART_LABEL });
    return list.items.map((d) => {
      const env = (d.spec?.template.spec?.containers ?? []).flatMap((c) => c.env ?? []);
      const value = env.find((e) => e.name === 'HOLT_OPERATOR_NAMESPACES')?.value ?? '';
      return {
        namespace: d.metadata?.namespace ?? '',
        name: d.metadata?.name ?? '',
        watches: value
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      };
    });
  } catch {
    return undefined;
  }
}
