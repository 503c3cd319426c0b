import { LuaScript } from './script.ts';

/**
 * One level of the pup's context walk in one round trip. For each id: its artefact hash and, when its
 * thread holds a higher version, that latest version's hash (the second lookup depends on the first,
 * so a plain pipeline would need three round trips per level). ARGV = key prefix, then the ids.
 * Returns [hash, latestHash] pairs as flat arrays ({} when missing or already the latest).
 * Keys are built in Lua from the prefix: fine on one Redis (Holt's deployment), not cluster-safe.
 */
export const contextLevelScript = new LuaScript(`
local p = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local h = redis.call('HGETALL', p .. 'artefact:' .. ARGV[i])
  local latest = {}
  if #h > 0 then
    local lid, ver
    for j = 1, #h, 2 do
      if h[j] == 'logical_id' then lid = h[j + 1] elseif h[j] == 'version' then ver = tonumber(h[j + 1]) end
    end
    if lid and ver then
      local top = redis.call('ZREVRANGE', p .. 'thread:' .. lid, 0, 0, 'WITHSCORES')
      if #top == 2 and top[1] ~= ARGV[i] and tonumber(top[2]) > ver then
        latest = redis.call('HGETALL', p .. 'artefact:' .. top[1])
      end
    end
  end
  out[#out + 1] = h
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
