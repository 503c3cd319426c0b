// `make cluster-up` / `make cluster-down`: a real local Kubernetes cluster on this machine (control
// plane, kubelets on containerd + runc, CNI, kube-proxy, CoreDNS, a default StorageClass) with the
// project's images loaded. Run as root (network namespaces, mounts). See test/cluster/cluster.ts.
import { existsSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { Command, InvalidArgumentError } from 'commander';
import { projectImages, startCluster, stopClusterAt } from '../test/cluster/cluster.ts';

const defaultDir = (name: string) =>
  join(process.env.HOLT_HOME ?? join(homedir(), '.holt'), 'clusters', name);
const nodeCount = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 8) throw new InvalidArgumentError('a whole number from 1 to 8');
  return n;
};

const program = new Command('cluster').description(
  'A real local Kubernetes cluster for Holt (root; network namespaces keep all its traffic on this machine).',
);

program
  .command('up')
  .description('start the cluster; the last line printed is the kubeconfig path')
  .option('--name <name>', 'cluster name (node names are <name>-node-<i>)', 'holt')
  .option(
    '--nodes <n>',
    'number of nodes (default: $NODES or 1)',
    nodeCount,
    nodeCount(process.env.NODES ?? '1'),
  )
  .option('--dir <dir>', 'state directory (default ~/.holt/clusters/<name>)')
  .option('--no-images', "don't load the project's images (make images)")
  .action(async (o: { name: string; nodes: number; dir?: string; images: boolean }) => {
    const dir = o.dir ?? defaultDir(o.name);
    if (existsSync(join(dir, 'cluster.json'))) {
      process.stderr.write(`a cluster state exists in ${dir}: stopping it first\n`);
      await stopClusterAt(dir);
    }
    rmSync(dir, { recursive: true, force: true });
    const t0 = Date.now();
    const cluster = await startCluster({
      name: o.name,
      nodes: o.nodes,
      dir,
      detached: true,
      images: o.images ? projectImages() : [],
      log: (l) => process.stderr.write(`==> ${l} (${((Date.now() - t0) / 1000).toFixed(0)}s)\n`),
    });
    process.stderr.write(
      `cluster ${o.name} is up in ${((Date.now() - t0) / 1000).toFixed(0)}s: ${cluster.nodes.length} node(s), API server ${cluster.server}\n` +
        `stop it with: make cluster-down${o.name === 'holt' ? '' : ` NAME=${o.name}`}\n`,
    );
    process.stdout.write(`${cluster.kubeconfigPath}\n`);
    process.exit(0);
  });

program
  .command('down')
  .description('stop the cluster and remove everything it made')
  .option('--name <name>', 'cluster name', 'holt')
  .option('--dir <dir>', 'state directory (default ~/.holt/clusters/<name>)')
  .action(async (o: { name: string; dir?: string }) => {
    const dir = o.dir ?? defaultDir(o.name);
    if (!existsSync(join(dir, 'cluster.json'))) {
      process.stderr.write(`no cluster state in ${dir}: nothing to stop\n`);
      return;
    }
    await stopClusterAt(dir);
    rmSync(dir, { recursive: true, force: true });
    process.stderr.write(`cluster ${o.name} stopped and removed\n`);
  });

await program.parseAsync();
