import { LuaScript } from './script.ts';

/**
 * Write-once artefact: KEYS = artefact, thread, artefact index, artefact_events channel, then the
 * children index of each source (so a claim's outputs are found without a scan).
 * ARGV = id, version, created_at_ms, json, then field/value pairs. Returns 1 if written, 0 if it existed.
 */
export const createArtefactScript = new LuaScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
for i = 5, #KEYS do redis.call('SADD', KEYS[i], ARGV[1]) end
redis.call('PUBLISH', KEYS[4], ARGV[4])
return 1
`);

/**
 * Claim creation, idempotent per artefact unless ARGV[4] = '1' (a feedback claim overwrites the index).
 * KEYS = claim, claim_by_artefact, claim index, active (or, for a dormant claim, dormant) set,
 * claim_events channel, claim_updates channel.
 * ARGV = claim id, created ms, json, overwrite, then field/value pairs. Returns the id of the artefact's claim.
 */
export const createClaimScript = new LuaScript(`
if ARGV[4] ~= '1' then
  local existing = redis.call('GET', KEYS[2])
  if existing then return existing end
end
local fields = {'rev', '1'}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('SET', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('PUBLISH', KEYS[5], ARGV[3])
redis.call('PUBLISH', KEYS[6], ARGV[3])
return ARGV[1]
`);

/**
 * Compare-and-set of a whole claim on its revision. KEYS = claim, active set, claim_updates channel,
 * dormant set. ARGV = expected rev, claim id, state ('1' complete/terminated: in neither set; '2'
 * dormant: in the dormant set; '0': in the active set), json, then field/value pairs.
 * Returns the new rev, or -1 when the claim moved on (or vanished) since it was read.
 */
export const updateClaimScript = new LuaScript(`
local rev = redis.call('HGET', KEYS[1], 'rev')
if not rev then
  if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
  rev = '0'
end
if rev ~= ARGV[1] then return -1 end
local next = tonumber(rev) + 1
local fields = {'rev', tostring(next)}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
if ARGV[3] == '1' then
  redis.call('SREM', KEYS[2], ARGV[2])
  redis.call('SREM', KEYS[4], ARGV[2])
elseif ARGV[3] == '2' then
  redis.call('SREM', KEYS[2], ARGV[2])
  redis.call('SADD', KEYS[4], ARGV[2])
else
  redis.call('SADD', KEYS[2], ARGV[2])
  redis.call('SREM', KEYS[4], ARGV[2])
end
redis.call('PUBLISH', KEYS[3], ARGV[4])
return next
`);

/**
 * Lease: KEYS = lock, holder. ARGV = holder id, ttl ms, Holt's lock value (orchestrator:{unix_seconds}).
 * Takes the lease if free or already ours (then it renews). Returns 1 when held by us, 0 otherwise.
 */
export const acquireLockScript = new LuaScript(`
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[2])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return 1
`);

/** Release only our own lease. KEYS = lock, holder. ARGV = holder id. */
export const releaseLockScript = new LuaScript(`
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
return 0
`);

/** Replace the agent registry atomically. KEYS = agents hash, rev, channel. ARGV = role/json pairs. */
export const setAgentsScript = new LuaScript(`
redis.call('DEL', KEYS[1])
if #ARGV > 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
local rev = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', KEYS[3], tostring(rev))
return rev
`);

/**
 * Everything one orchestrator step reads, in one round trip: the claim hash and, when it exists, its
 * bids (ARGV[2] = '1'), its target artefact (ARGV[3] = '1') and the hashes of the target's children
 * (the outputs index). KEYS = claim, bids. ARGV = key prefix, want bids, want target.
 * Returns {} for a missing claim, else {claim, bids, target, child id 1, child hash 1, ...} (flat hashes).
 * Keys are built in Lua from the prefix: fine on one Redis (Holt's deployment), not cluster-safe.
 */
export const claimSnapshotScript = new LuaScript(`
local c = redis.call('HGETALL', KEYS[1])
if #c == 0 then return {} end
local aid = ''
for i = 1, #c, 2 do if c[i] == 'artefact_id' then aid = c[i + 1] break end end
local p = ARGV[1]
local out = {c, {}, {}}
if ARGV[2] == '1' then out[2] = redis.call('HGETALL', KEYS[2]) end
if ARGV[3] == '1' and aid ~= '' then out[3] = redis.call('HGETALL', p .. 'artefact:' .. aid) end
if aid ~= '' then
  for _, id in ipairs(redis.call('SMEMBERS', p .. 'index:children:' .. aid)) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGETALL', p .. 'artefact:' .. id)
  end
end
return out
`);
