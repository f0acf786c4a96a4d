// JSON and YAML text of the generated files, with the keys in the order a reader expects
// (an alert's name before its expr, a panel's title before its options) instead of
// std.manifest*'s alphabetical order, and long alert texts folded in the YAML.
local text = import 'text.libsonnet';

// The keys of `object`: those in `order` first, in that order, then the others
// alphabetically, then those in `last`, in that order.
local keyOrder(order, object, last=[]) =
  local fields = std.objectFields(object);
  [k for k in order if std.objectHas(object, k)]
  + [k for k in fields if std.count(order, k) == 0 && std.count(last, k) == 0]
  + [k for k in last if std.objectHas(object, k)];

local indentOf(depth) = std.repeat('  ', depth);

{
  // JSON with two-space indentation, `[]` and `{}` for empty values and the keys of
  // `order` first (in that order), the others alphabetically, those of `last` last.
  json(value, order=[], last=[]):: $.jsonAt(value, order, last, 0) + '\n',

  jsonAt(value, order, last, depth)::
    local inner = indentOf(depth + 1);
    if std.isObject(value) then
      local keys = keyOrder(order, value, last);
      if keys == [] then '{}'
      else '{\n' + std.join(',\n', [
        inner + std.escapeStringJson(k) + ': ' + $.jsonAt(value[k], order, last, depth + 1)
        for k in keys
      ]) + '\n' + indentOf(depth) + '}'
    else if std.isArray(value) then
      if value == [] then '[]'
      else '[\n' + std.join(',\n', [inner + $.jsonAt(v, order, last, depth + 1) for v in value])
           + '\n' + indentOf(depth) + ']'
    else if std.isNumber(value) then text.number(value)
    else std.manifestJsonEx(value, ''),

  // YAML for Prometheus rule files: block mappings and sequences, multi-line strings as
  // literal blocks, long one-line strings folded at `width` columns, short strings plain
  // when YAML reads them back as the same string and double-quoted otherwise.
  yaml(value, order=[], width=100):: $.yamlAt(value, order, width, 0) + '\n',

  yamlAt(value, order, width, depth)::
    local pad = indentOf(depth);
    if std.isObject(value) then
      std.join('\n', [
        local v = value[k];
        pad + k + ':' + (
          if (std.isObject(v) && std.length(v) > 0) then '\n' + $.yamlAt(v, order, width, depth + 1)
          else if (std.isArray(v) && std.length(v) > 0) then '\n' + $.yamlAt(v, order, width, depth + 1)
          else ' ' + $.yamlScalar(v, width, depth + 1)
        )
        for k in keyOrder(order, value)
      ])
    else if std.isArray(value) then
      std.join('\n', [
        // "- " then the item's first line; the item's other lines are indented past the dash.
        local item = $.yamlAt(v, order, width, depth + 1);
        pad + '- ' + std.lstripChars(item, ' ')
        for v in value
      ])
    else pad + $.yamlScalar(value, width, depth),

  // A scalar whose block lines (if any) are indented to `depth`.
  yamlScalar(value, width, depth)::
    if std.isString(value) then
      local pad = indentOf(depth);
      local folded = $.wrap(value, width - std.length(pad));
      if std.length(std.findSubstr('\n', value)) > 0 then
        local lines = std.split(std.rstripChars(value, '\n'), '\n');
        local chomp = if std.endsWith(value, '\n') then '|' else '|-';
        if std.endsWith(value, '\n\n') || std.startsWith(value, ' ') then std.escapeStringJson(value)
        else chomp + '\n' + std.join('\n', [if l == '' then '' else pad + l for l in lines])
      else if $.foldable(value) && std.length(folded) > 2 then
        '>-\n' + std.join('\n', [pad + l for l in folded])
      else if $.plain(value) then value
      else std.escapeStringJson(value)
    else if value == {} then '{}'
    else if value == [] then '[]'
    else if std.isNumber(value) then text.number(value)
    else std.manifestJsonEx(value, ''),

  // A string YAML reads back unchanged when written plain (in block context): a letter
  // first, then letters, digits, spaces and the punctuation of PromQL outside quotes, no
  // `: ` or ` #`, no space or colon at the end, and not one of YAML 1.1's booleans or null;
  // or a Prometheus duration such as 5m or 1h30m.
  plain(s)::
    local chars(text) = std.set(std.stringChars(text));
    local letters = chars('abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ');
    local only(text, allowed) = std.length([ch for ch in std.stringChars(text) if !std.setMember(ch, allowed)]) == 0;
    local duration = only(s, chars('0123456789smhdwy')) && std.setMember(s[std.length(s) - 1], chars('smhdwy'));
    std.length(s) > 0 && (
      (std.setMember(s[0], chars('0123456789')) && duration)
      || (std.setMember(s[0], letters)
          && only(s, std.setUnion(letters, chars('0123456789_-./: ()<>=!+*,[]')))
          && std.length(std.findSubstr(': ', s)) == 0
          && std.length(std.findSubstr(' #', s)) == 0
          && !std.endsWith(s, ':') && !std.endsWith(s, ' ')
          && !std.setMember(std.asciiLower(s), std.set(['y', 'n', 'yes', 'no', 'on', 'off', 'true', 'false', 'null'])))
    ),

  // A folded block reads back as the same string when the text has no line break, no
  // tab, no run of spaces and no space at either end: each line break becomes one space.
  foldable(s)::
    std.length(s) > 0
    && std.length(std.findSubstr('  ', s)) == 0
    && std.length(std.findSubstr('\t', s)) == 0
    && !std.startsWith(s, ' ') && !std.endsWith(s, ' '),

  // Words of `s` in lines of at most `width` characters (a longer word gets a line of its
  // own). Go template actions of up to 48 characters ({{ $labels.topic }}/{{ $labels.partition }})
  // stay on one line.
  wrap(s, width)::
    local words = std.split(s, ' ');
    local last(xs) = if xs == [] then -1 else xs[std.length(xs) - 1];
    local opens(w) = last(std.findSubstr('{{', w)) > last(std.findSubstr('}}', w));
    local closes(w) = std.length(std.findSubstr('}}', w)) > 0;
    // Tokens: words, with the words of a short action joined by spaces.
    local join(state, word) =
      if state.pending != null then
        local pending = state.pending + ' ' + word;
        if closes(word) && !opens(word) then { tokens: state.tokens + [pending], pending: null }
        else if std.length(pending) > 48 then { tokens: state.tokens + std.split(pending, ' '), pending: null }
        else { tokens: state.tokens, pending: pending }
      else if opens(word) then { tokens: state.tokens, pending: word }
      else { tokens: state.tokens + [word], pending: null };
    local joined = std.foldl(join, words, { tokens: [], pending: null });
    local tokens = joined.tokens + (if joined.pending == null then [] else std.split(joined.pending, ' '));
    local step(lines, token) =
      local last = lines[std.length(lines) - 1];
      if last == '' then lines[:std.length(lines) - 1] + [token]
      else if std.length(last) + 1 + std.length(token) <= width then lines[:std.length(lines) - 1] + [last + ' ' + token]
      else lines + [token];
    std.foldl(step, tokens, ['']),
}
