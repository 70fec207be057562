// Formatting helpers. Jsonnet prints 0.3 as 0.29999999999999999 (std.toString), so every
// number that ends up in an expression or a sentence goes through num().
{
  // The shortest decimal form of x with at least minDecimals decimals that reads back as x:
  // num(0.3, 2) = '0.30', num(1.5) = '1.5', num(1073741824) = '1073741824'.
  num(x, minDecimals=0)::
    local go(d) =
      local s = std.format('%.' + d + 'f', x);
      if d >= 12 || std.parseJson(s) == x then s else go(d + 1);
    if minDecimals == 0 && x == std.floor(x) then std.format('%d', x) else go(std.max(minDecimals, 1)),

  // x rounded to the nearest integer (std.round is missing from older jsonnet releases).
  round(x):: std.floor(x + 0.5),

  // A share as a whole percentage: percent(0.75) = '75'.
  percent(x):: std.format('%d', self.round(x * 100)),

  local units = { s: 'second', m: 'minute', h: 'hour', d: 'day' },
  // '5m' -> { n: '5', unit: 'minute' }; null for anything else ('1h30m', '500ms').
  local parse(d) =
    local n = std.substr(d, 0, std.length(d) - 1);
    local u = std.substr(d, std.length(d) - 1, 1);
    local digits = std.length(n) > 0 && std.length([c for c in std.stringChars(n) if !std.member('0123456789', c)]) == 0;
    if std.objectHas(units, u) && digits then { n: n, unit: units[u] } else null,

  // '2m' -> '2 minutes', '1m' -> '1 minute'; other durations as they are.
  duration(d)::
    local p = parse(d);
    if p == null then d else p.n + ' ' + p.unit + (if p.n == '1' then '' else 's'),

  // '5m' -> '5-minute' (as in "5-minute average"); other durations as they are.
  durationAdjective(d)::
    local p = parse(d);
    if p == null then d else p.n + '-' + p.unit,

  // A `description` annotation written as lines: its text is the lines joined with spaces;
  // the hidden `folds` keeps the lines, where render.py folds the rendered YAML.
  description(lines):: {
    description: std.join(' ', lines),
    folds:: { description: lines },
  },
}
