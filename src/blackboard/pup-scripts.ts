import { LuaScript } from './script.ts';

/**
 * The thread half of one level of the pup's context walk, sent in the same pipeline as the level's
 * HGETALLs (so the level is still one round trip). For each id: when its thread holds a higher version,
 * that latest version's hash, else {}. The lookup depends on the artefact's logical_id, so it runs
 * server-side; only the small fields go through Lua (HMGET), never the whole hash of every id (through
 * Lua a hash costs about three times what a plain HGETALL does). ARGV = key prefix, then the ids.
 * Keys are built in Lua from the prefix: right for one Redis (Holt's deployment); Holt's key names put
 * an instance's keys in many hash slots, so no multi-key script of the blackboard is Cluster-safe.
 */
export const contextThreadsScript = new LuaScript(`
local p = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local m = redis.call('HMGET', p .. 'artefact:' .. id, 'logical_id', 'version')
  local latest = {}
  local v = tonumber(m[2])
  if m[1] and v then
    local top = redis.call('ZREVRANGE', p .. 'thread:' .. m[1], 0, 0, 'WITHSCORES')
    if top[1] and top[1] ~= id and (tonumber(top[2]) or 0) > v then
      latest = redis.call('HGETALL', p .. 'artefact:' .. top[1])
    end
  end
  out[#out + 1] = latest
end
return out
`);

/** Release an execution lease only if we still hold it. KEYS = lease. ARGV = owner. */
/** Extends a lease held by ARGV[1] to ARGV[2] ms from now; 0 when someone else holds it (or nobody). */
export const renewLeaseScript = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
`);

export const releaseLeaseScript = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`);
