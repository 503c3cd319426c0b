import { randomUUID } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostgresServer, startPostgres } from '../../test/harness/postgres.ts';
import { FenceLostError } from '../common/errors.ts';
import { createPool } from '../common/pg.ts';
import {
  beginLease,
  closeDelivered,
  endLease,
  ensureHead,
  ensureTurn,
  leaseTurn,
  releaseLease,
  renewLease,
  reopenFinished,
  resumeLease,
} from './head.ts';
import { migrate } from './migrate.ts';
import type { Fence } from './schema.ts';

let server: PostgresServer;
let pool: pg.Pool;
beforeAll(async () => {
  server = await startPostgres();
  await migrate(server.url);
  pool = createPool(server.url, { max: 2 });
});
afterAll(async () => {
  await pool?.end();
  await server?.stop();
});

const I = 'head-test';

/** A fresh actor with one queued turn. */
async function actor() {
  const ref = { instance: I, actorId: randomUUID(), turnId: randomUUID() };
  await ensureHead(pool, {
    instance: I,
    actorId: ref.actorId,
    role: 'dev',
    workerTarget: 'dev',
    claimId: 'c',
  });
  const key = { ...ref, claimId: 'c', role: 'dev', phase: 'exclusive', claimType: 'exclusive' };
  expect(await ensureTurn(pool, key)).toBe(true);
  expect(await ensureTurn(pool, key)).toBe(false); // minted once
  return ref;
}

const head = async (actorId: string) =>
  (
    await pool.query(
      'SELECT status, active_turn_id, lease_owner, turn_epoch FROM holt.agent_state_head WHERE actor_id = $1',
      [actorId],
    )
  ).rows[0];
const turnOf = async (turnId: string) =>
  (await pool.query('SELECT status, turn_epoch, result FROM holt.agent_turns WHERE turn_id = $1', [turnId]))
    .rows[0];
const fence = (ref: { actorId: string; turnId: string }, epoch: number, owner: string): Fence => ({
  instance: I,
  inboxId: '',
  actorId: ref.actorId,
  turnId: ref.turnId,
  epoch,
  owner,
});

describe('the fence head (src/state/head.ts)', () => {
  it("a lease is refused while another owner's is live, and taken over under a new epoch once it lapsed", async () => {
    const ref = await actor();
    const a = await leaseTurn(pool, { ...ref, owner: 'a', leaseMs: 60_000 });
    expect(a).toBe(1);
    expect(await leaseTurn(pool, { ...ref, owner: 'b', leaseMs: 60_000 })).toBeNull();
    expect(await leaseTurn(pool, { ...ref, owner: 'a', leaseMs: 60_000 })).toBe(2); // the holder again
    await pool.query(
      `UPDATE holt.agent_state_head SET lease_expires_at = now() - interval '1 second' WHERE actor_id = $1`,
      [ref.actorId],
    ); // a's lease lapsed
    const b = await leaseTurn(pool, { ...ref, owner: 'b', leaseMs: 60_000 });
    expect(b).toBe(3);
    // a's fence is dead for every fenced write: nothing changes.
    const before = await head(ref.actorId);
    await expect(renewLease(pool, fence(ref, 2, 'a'), 60_000)).rejects.toThrow(FenceLostError);
    await expect(releaseLease(pool, fence(ref, 2, 'a'), 'suspended')).rejects.toThrow(FenceLostError);
    await expect(endLease(pool, fence(ref, 2, 'a'), { status: 'done' })).rejects.toThrow(FenceLostError);
    expect(await head(ref.actorId)).toEqual(before);
    // b's holds: it ends the turn, the head idle at its epoch.
    await renewLease(pool, fence(ref, 3, 'b'), 60_000);
    await endLease(pool, fence(ref, 3, 'b'), { status: 'done', result: { ok: 1 } });
    expect(await head(ref.actorId)).toMatchObject({
      status: 'idle',
      active_turn_id: null,
      lease_owner: null,
    });
    expect(await turnOf(ref.turnId)).toMatchObject({ status: 'done', result: { ok: 1 } });
  });

  it('a life lease begins only on an idle head, and resumes only the turn the head names', async () => {
    const ref = await actor();
    const other = { ...ref, turnId: randomUUID() };
    expect(await resumeLease(pool, { ...ref, owner: 'a', leaseMs: 60_000 })).toBeNull(); // no active turn
    const e = await beginLease(pool, { ...ref, owner: 'a', leaseMs: 60_000 });
    expect(e).toBe(1);
    expect(await beginLease(pool, { ...other, owner: 'a', leaseMs: 60_000 })).toBeNull(); // busy
    expect(await resumeLease(pool, { ...other, owner: 'a', leaseMs: 60_000 })).toBeNull(); // not this turn
    await releaseLease(pool, fence(ref, 1, 'a'), 'suspended');
    expect(await resumeLease(pool, { ...ref, owner: 'b', leaseMs: 60_000 })).toBe(2);
  });

  it('closing a delivered turn and reopening a finished one each happen once, and kill the old fence', async () => {
    const ref = await actor();
    const e = (await leaseTurn(pool, { ...ref, owner: 'a', leaseMs: 60_000 }))!;
    const art = randomUUID();
    expect(await reopenFinished(pool, ref, 'not finished')).toBe(false);
    expect(await closeDelivered(pool, ref, art)).toBe(true);
    expect(await closeDelivered(pool, ref, art)).toBe(false);
    expect(await head(ref.actorId)).toMatchObject({
      status: 'idle',
      active_turn_id: null,
      turn_epoch: String(e + 1),
    });
    await expect(renewLease(pool, fence(ref, e, 'a'), 60_000)).rejects.toThrow(FenceLostError);
    expect(await reopenFinished(pool, ref, 'output lost')).toBe(true);
    expect(await reopenFinished(pool, ref, 'output lost')).toBe(false);
    expect(await turnOf(ref.turnId)).toMatchObject({ status: 'queued' });
    expect(await head(ref.actorId)).toMatchObject({ turn_epoch: String(e + 2) });
  });
});
