// Durations and paragraphs in the words of alert texts.
{
  // A paragraph written over several lines (a ||| block) as one line, the way YAML folds
  // it: each line break becomes a space.
  fold(text):: std.join(' ', std.split(std.rstripChars(text, '\n'), '\n')),

  // 'N minutes' for a Prometheus duration of a single unit ('5m', '2s', '1h'); the
  // duration itself otherwise.
  duration(d)::
    local units = { s: 'second', m: 'minute', h: 'hour', d: 'day' };
    local unit = d[std.length(d) - 1];
    local digits = d[:std.length(d) - 1];
    local isNumber = std.length(digits) > 0
                     && std.length([ch for ch in std.stringChars(digits) if std.count(std.stringChars('0123456789'), ch) == 0]) == 0;
    if std.objectHas(units, unit) && isNumber then
      $.count(std.parseInt(digits), units[unit])
    else d,

  // '2 minutes' for 120, '15 minutes' for 900, '90 seconds' for 90.
  seconds(n)::
    if n >= 3600 && n % 3600 == 0 then $.count(n / 3600, 'hour')
    else if n >= 60 && n % 60 == 0 then $.count(n / 60, 'minute')
    else $.count(n, 'second'),

  count(n, unit):: std.toString(n) + ' ' + unit + (if n == 1 then '' else 's'),

  // A number as PromQL and JSON read it, the same from every jsonnet implementation:
  // 5000, 0.05 (not 0.050000000000000003).
  number(n):: if n == std.floor(n) then '%d' % n else '%.15g' % n,
}
