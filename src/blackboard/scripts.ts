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
 * Lua shared by the scripts that create a claim: the hash (at rev 1, fields from ARGV[first] on), the
 * claim_by_artefact entry, the claim index, the active (or dormant) set, and the announcements.
 */
const CREATE_CLAIM = `
local function create_claim(claim, byArtefact, index, set, eventsChannel, updatesChannel, id, ms, json, first)
  local fields = {'rev', '1'}
  for i = first, #ARGV do fields[#fields + 1] = ARGV[i] end
  redis.call('HSET', claim, unpack(fields))
  redis.call('SET', byArtefact, id)
  redis.call('ZADD', index, ms, id)
  redis.call('SADD', set, id)
  redis.call('PUBLISH', eventsChannel, json)
  redis.call('PUBLISH', updatesChannel, json)
end`;

/**
 * Lua shared by the scripts that read a target's outputs: appends to `out` the id and hash of each
 * artefact in the children index `childrenKey` but `skip`, as id, hash, id, hash, ... (`p` is the key prefix).
 */
const ADD_CHILDREN = `
local function add_children(out, p, childrenKey, skip)
  for _, cid in ipairs(redis.call('SMEMBERS', childrenKey)) do
    if cid ~= skip then
      out[#out + 1] = cid
      out[#out + 1] = redis.call('HGETALL', p .. 'artefact:' .. cid)
    end
  end
  return out
end`;

/**
 * Claim creation, idempotent per artefact unless ARGV[4] = '1' (a feedback claim overwrites the index).
 * KEYS = claim, claim_by_artefact, claim index, active (or, for a dormant claim, dormant) set,
 * claim_events channel, claim_updates channel.
 * ARGV = claim id, created ms, json, overwrite, then field/value pairs. Returns the id of the artefact's claim.
 */
export const createClaimScript = new LuaScript(`${CREATE_CLAIM}
if ARGV[4] ~= '1' then
  local existing = redis.call('GET', KEYS[2])
  if existing then return existing end
end
create_claim(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1], ARGV[2], ARGV[3], 5)
return ARGV[1]
`);

/**
 * What the orchestrator does with an artefact it hears of, in one script: index it (Holt's own pups
 * write artefacts with a plain HSET), create its claim unless it has one (ARGV[5] = '1'), find the
 * claims of its sources (it may be their output), and read what each of those claims' next step
 * would: its rev and the source's other children (so that step need not read them again).
 * KEYS = artefact index, claim_by_artefact, claim, claim index, active set, claim_events channel,
 * claim_updates channel, then per source: its children index and its claim_by_artefact.
 * ARGV = artefact id, created_at_ms, source count, key prefix, want claim, claim id, claim created ms,
 * claim json, then the claim's field/value pairs.
 * Returns {the artefact's claim id or '', 1 if created here else 0, each source's claim id or '',
 * then per source: {} when it has no claim, else {its claim's rev, child id, child hash, ...} (the
 * children other than this artefact)}.
 */
export const artefactArrivedScript = new LuaScript(`${CREATE_CLAIM}${ADD_CHILDREN}
local id, p = ARGV[1], ARGV[4]
local n = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], 'NX', ARGV[2], id)
local out = {'', 0}
for i = 1, n do
  redis.call('SADD', KEYS[6 + 2 * i], id)
  out[#out + 1] = redis.call('GET', KEYS[7 + 2 * i]) or ''
end
if ARGV[5] == '1' then
  local existing = redis.call('GET', KEYS[2])
  if existing then
    out[1] = existing
  else
    create_claim(KEYS[3], KEYS[2], KEYS[4], KEYS[5], KEYS[6], KEYS[7], ARGV[6], ARGV[7], ARGV[8], 9)
    out[1] = ARGV[6]
    out[2] = 1
  end
end
-- A source claim or child that cannot be read (a key of the wrong type) costs only this read-ahead:
-- its claim's step reads for itself, and reports it.
local function read_ahead(owner, childrenKey)
  return add_children({redis.call('HGET', p .. 'claim:' .. owner, 'rev') or ''}, p, childrenKey, id)
end
for i = 1, n do
  local owner = out[2 + i]
  local snap = {}
  if owner ~= '' then
    local ok, r = pcall(read_ahead, owner, KEYS[6 + 2 * i])
    if ok then snap = r end
  end
  out[#out + 1] = snap
end
return out
`);

/**
 * Compare-and-set of whole claims on their revisions, each with the messages that announce its
 * change; several claims per call, each set or refused on its own. Per claim: KEYS = claim, active
 * set, claim_updates channel, dormant set; ARGV = count of this claim's arguments, then expected
 * rev, claim id, state ('1' complete/terminated: in neither set; '2' dormant: in the dormant set;
 * '0': in the active set), json, n, n channel/message pairs published after the write, and the
 * field/value pairs. Returns per claim the new rev, -1 when it moved on (or vanished) since read, or
 * an 'ERR …' string when its update failed (the others are unaffected).
 */
export const updateClaimsScript = new LuaScript(`
local function update(claim, active, updates, dormant, a, last)
  local rev = redis.call('HGET', claim, 'rev')
  if not rev then
    if redis.call('EXISTS', claim) == 0 then return -1 end
    rev = '0'
  end
  if rev ~= ARGV[a] then return -1 end
  local id, state = ARGV[a + 1], ARGV[a + 2]
  local next = tonumber(rev) + 1
  local pubs = a + 5 + 2 * tonumber(ARGV[a + 4])
  local fields = {'rev', tostring(next)}
  for i = pubs, last do fields[#fields + 1] = ARGV[i] end
  redis.call('HSET', claim, unpack(fields))
  if state == '1' then
    redis.call('SREM', active, id)
    redis.call('SREM', dormant, id)
  elseif state == '2' then
    redis.call('SREM', active, id)
    redis.call('SADD', dormant, id)
  else
    redis.call('SADD', active, id)
    redis.call('SREM', dormant, id)
  end
  redis.call('PUBLISH', updates, ARGV[a + 3])
  for i = a + 5, pubs - 1, 2 do redis.call('PUBLISH', ARGV[i], ARGV[i + 1]) end
  return next
end
local out = {}
local pos = 1
for i = 1, #KEYS / 4 do
  local n = tonumber(ARGV[pos])
  local k = 4 * (i - 1)
  -- One claim's failure (a key of the wrong type, say) is its own: the others are still set.
  local ok, r = pcall(update, KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4], pos + 1, pos + n)
  out[i] = ok and r or ('ERR ' .. tostring(r))
  pos = pos + 1 + n
end
return out
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

/**
 * Replace the agent registry atomically, with Holt's image audit (agent_images: role → image digest)
 * from the registrations' image_id. KEYS = agents hash, rev, channel, agent_images. ARGV = role/json pairs.
 */
export const setAgentsScript = new LuaScript(`
redis.call('DEL', KEYS[1], KEYS[4])
if #ARGV > 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
for i = 1, #ARGV, 2 do
  local img = cjson.decode(ARGV[i + 1]).image_id
  if type(img) == 'string' and img ~= '' then redis.call('HSET', KEYS[4], ARGV[i], img) end
end
local rev = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', KEYS[3], tostring(rev))
return rev
`);

/**
 * Everything one orchestrator step reads, in one round trip: the claim hash and, when it exists, its
 * bids (ARGV[2] = '1'), its target artefact (ARGV[3] = '1') and the hashes of the target's children
 * (the outputs index). KEYS = claim, bids. ARGV = key prefix, want bids, want target, and the rev and
 * target id of the claim as the caller last knew it ('' if not known): when the claim is still at that
 * rev, only {'rev', rev} comes back instead of the whole hash.
 * Several claims per call (KEYS and the last four ARGV repeat per claim); per claim: {} for a missing
 * claim, an 'ERR …' string when its read failed, else {claim, bids, target, child id 1, child hash 1,
 * ...} (flat hashes).
 * Keys are built in Lua from the prefix: fine on one Redis (Holt's deployment), not cluster-safe.
 */
export const claimSnapshotScript = new LuaScript(`${ADD_CHILDREN}
local p = ARGV[1]
local function snap(claimKey, bidsKey, wantBids, wantTarget, rev, knownAid)
  local c
  local aid = ''
  if rev ~= '' and redis.call('HGET', claimKey, 'rev') == rev then
    c = {'rev', rev}
    aid = knownAid
  else
    c = redis.call('HGETALL', claimKey)
    if #c == 0 then return {} end
    for i = 1, #c, 2 do if c[i] == 'artefact_id' then aid = c[i + 1] break end end
  end
  local out = {c, {}, {}}
  if wantBids == '1' then out[2] = redis.call('HGETALL', bidsKey) end
  if wantTarget == '1' and aid ~= '' then out[3] = redis.call('HGETALL', p .. 'artefact:' .. aid) end
  if aid ~= '' then add_children(out, p, p .. 'index:children:' .. aid, '') end
  return out
end
local all = {}
for i = 1, #KEYS / 2 do
  local a = 2 + 4 * (i - 1)
  local ok, r = pcall(snap, KEYS[2 * i - 1], KEYS[2 * i], ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3])
  all[i] = ok and r or ('ERR ' .. tostring(r))
end
return all
`);
