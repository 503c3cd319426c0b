// A throwaway Kubernetes API server on this machine (etcd + kube-apiserver + kube-controller-manager,
// the binaries `make setup` built), for trying the chart and the operator without a cluster.
// Pods are never started here: there is no kubelet. Ctrl-C stops everything and deletes its files.
import { startKube } from '../test/harness/kube.ts';

const kube = await startKube({ controllerManager: true });
process.stdout.write(
  `API server ${kube.server} is ready.\n\n  export KUBECONFIG=${kube.kubeconfigPath}\n\nCtrl-C to stop it.\n`,
);
await new Promise<void>((resolve) => {
  process.once('SIGINT', resolve);
  process.once('SIGTERM', resolve);
});
await kube.stop();
process.exit(0);
