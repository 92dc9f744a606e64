#!lua name=leaseside
-- leaseside fencing for Redis 7 (functions), version 1.
--
-- Load once (again to upgrade: REPLACE keeps the data):
--     leaseside fence redis install redis://...     (or)
--     redis-cli -x FUNCTION LOAD REPLACE < leaseside.lua
--
-- A fenced write names two keys: the key it writes, and its lease's token
-- key, leaseside:fence:LEASE, which holds the highest token the lease's
-- writes have carried (in Redis Cluster both must hash to one slot: give
-- the lease name and the key one hash tag). It is refused when its token
-- is below that highest; otherwise it records the token there and writes,
-- in one atomic step:
--     FCALL leaseside_set 2 KEY leaseside:fence:LEASE TOKEN VALUE
--     FCALL leaseside_del 2 KEY leaseside:fence:LEASE TOKEN
-- leaseside_set answers OK, leaseside_del the number of keys removed. A
-- token equal to the highest passes (a holder writes many times under
-- one token). Errors:
--   LEASESIDE_STALE stale token T for leaseside:fence:LEASE: highest seen H
--   LEASESIDE_BADARG ...   (a token that is not 0 to 18446744073709551615,
--                          or a key written that is itself a token key)
-- Tokens are compared as decimal numbers of up to 20 digits, exactly.

local prefix = 'leaseside:fence:'

-- canonical returns the token without leading zeros, or nil if it is not
-- a decimal number of at most 20 digits up to 2^64-1.
local function canonical(t)
  if type(t) ~= 'string' or not string.match(t, '^[0-9]+$') then
    return nil
  end
  t = string.gsub(t, '^0+', '')
  if t == '' then
    t = '0'
  end
  if #t > 20 or (#t == 20 and t > '18446744073709551615') then
    return nil
  end
  return t
end

-- below reports whether canonical token a is less than canonical b.
local function below(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end

-- admit checks the token against the lease's highest and records it:
-- nil when admitted, else the error to answer.
local function admit(keys, token)
  if #keys ~= 2 or string.sub(keys[2], 1, #prefix) ~= prefix or #keys[2] == #prefix then
    return redis.error_reply('LEASESIDE_BADARG want 2 keys: the key written and its lease\'s ' .. prefix .. 'LEASE')
  end
  if string.sub(keys[1], 1, #prefix) == prefix then
    return redis.error_reply('LEASESIDE_BADARG ' .. keys[1] .. ' is a token key: a fenced write cannot write one')
  end
  local t = canonical(token)
  if t == nil then
    return redis.error_reply('LEASESIDE_BADARG token must be a decimal number from 0 to 18446744073709551615, not ' .. tostring(token))
  end
  local seen = redis.call('GET', keys[2])
  if seen then
    seen = canonical(seen)
    if seen == nil then
      return redis.error_reply('LEASESIDE_BADARG ' .. keys[2] .. ' holds no token')
    end
    if below(t, seen) then
      return redis.error_reply('LEASESIDE_STALE stale token ' .. t .. ' for ' .. keys[2] .. ': highest seen ' .. seen)
    end
  end
  if seen ~= t then
    redis.call('SET', keys[2], t)
  end
  return nil
end

redis.register_function('leaseside_set', function(keys, args)
  if #args ~= 2 then
    return redis.error_reply('LEASESIDE_BADARG want 2 arguments: TOKEN VALUE')
  end
  local err = admit(keys, args[1])
  if err then
    return err
  end
  return redis.call('SET', keys[1], args[2])
end)

redis.register_function('leaseside_del', function(keys, args)
  if #args ~= 1 then
    return redis.error_reply('LEASESIDE_BADARG want 1 argument: TOKEN')
  end
  local err = admit(keys, args[1])
  if err then
    return err
  end
  return redis.call('DEL', keys[1])
end)
