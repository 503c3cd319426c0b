import { LuaScript } from './script.ts';

/**
 * Deletes one finished workflow, re-checking first (atomically) that it still is one: no claim of it
 * is active or live, no artefact of it gained a child or a claim outside it. KEYS = artefact index,
 * claim index, active set, dormant set; then per artefact its hash, claim_by_artefact, children index
 * and thread; then per claim its hash and bids. ARGV = artefact count, claim count, artefact ids,
 * claim ids. Returns {1, artefacts deleted, claims deleted}, or {0, why} when something changed.
 */
export const pruneWorkflowScript = new LuaScript(`
local nA, nC = tonumber(ARGV[1]), tonumber(ARGV[2])
local cbase = 4 + 4 * nA
local inA, inC = {}, {}
for i = 1, nA do inA[ARGV[2 + i]] = true end
for i = 1, nC do inC[ARGV[2 + nA + i]] = true end
for i = 1, nC do
  local id = ARGV[2 + nA + i]
  if redis.call('SISMEMBER', KEYS[3], id) == 1 then return {0, 'active claim ' .. id} end
  local f = redis.call('HMGET', KEYS[cbase + 2 * i - 1], 'status', 'dormant_reason')
  if f[1] and f[1] ~= 'complete' and f[1] ~= 'terminated' and not (f[2] and f[2] ~= '') then
    return {0, 'live claim ' .. id}
  end
end
for i = 1, nA do
  local k = 4 + 4 * (i - 1)
  for _, c in ipairs(redis.call('SMEMBERS', KEYS[k + 3])) do
    if not inA[c] then return {0, 'new child ' .. c} end
  end
  local cb = redis.call('GET', KEYS[k + 2])
  if cb and not inC[cb] then return {0, 'new claim ' .. cb} end
end
local na, nc = 0, 0
for i = 1, nA do
  local k = 4 + 4 * (i - 1)
  local id = ARGV[2 + i]
  na = na + redis.call('DEL', KEYS[k + 1])
  redis.call('DEL', KEYS[k + 2], KEYS[k + 3])
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[k + 4], id)
  if redis.call('ZCARD', KEYS[k + 4]) == 0 then redis.call('DEL', KEYS[k + 4]) end
end
for i = 1, nC do
  local id = ARGV[2 + nA + i]
  nc = nc + redis.call('DEL', KEYS[cbase + 2 * i - 1])
  redis.call('DEL', KEYS[cbase + 2 * i])
  redis.call('ZREM', KEYS[2], id)
  redis.call('SREM', KEYS[4], id)
end
return {1, na, nc}
`);

/**
 * Deletes finished claims whose artefact is gone (checked here, atomically). KEYS = claim index,
 * active set, dormant set, then per claim its hash, bids and artefact key. ARGV = claim ids.
 * Returns how many went.
 */
export const pruneClaimsScript = new LuaScript(`
local n = 0
for i = 1, #ARGV do
  local id = ARGV[i]
  local ck, bk, ak = KEYS[1 + 3 * i], KEYS[2 + 3 * i], KEYS[3 + 3 * i]
  if redis.call('EXISTS', ak) == 0 and redis.call('SISMEMBER', KEYS[2], id) == 0 then
    local f = redis.call('HMGET', ck, 'status', 'dormant_reason')
    if f[1] == 'complete' or f[1] == 'terminated' or (f[2] and f[2] ~= '') then
      redis.call('DEL', ck, bk)
      redis.call('ZREM', KEYS[1], id)
      redis.call('SREM', KEYS[3], id)
      n = n + 1
    end
  end
end
return n
`);
