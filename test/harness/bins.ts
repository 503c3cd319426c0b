// The harness uses the same server code as local mode (`holt up`).
export * from '../../src/local/bins.ts';
