// Pieces of PromQL built from the config: label selectors with the exporter's matchers and
// the dashboards' template variables, and a formatter that fills them into query text.
{
  // Query text helpers for config `c`. In text passed to fmt():
  //   %(c)s         the cluster label (kafka_cluster)
  //   %(exporter)s  a selector of only the exporter's matchers ('' when there are none)
  //   %(cluster)s   the exporter's matchers and the $cluster variable
  //   %(topic)s, %(group)s, %(groupTopic)s, %(partition)s, %(groupPartition)s: the same
  //                 with $topic, $group, $partition.
  new(c):: {
    local cluster = c.clusterLabel + '=~"$cluster"',
    local topic = 'topic=~"$topic"',
    local group = 'group=~"$group"',
    local partition = 'partition=~"$partition"',

    vars:: {
      c: c.clusterLabel,
      exporter: $.selector(c, []),
      cluster: $.selector(c, [cluster]),
      topic: $.selector(c, [cluster, topic]),
      group: $.selector(c, [cluster, group]),
      groupTopic: $.selector(c, [cluster, group, topic]),
      partition: $.selector(c, [cluster, topic, partition]),
      groupPartition: $.selector(c, [cluster, group, topic, partition]),
    },

    // `text` (a ||| block or a string) with the selectors filled in, without its final
    // line break.
    fmt(text):: std.rstripChars(text, '\n') % self.vars,
  },

  // `{matchers}`: the exporter's selector followed by `matchers`; '' when both are empty.
  selector(c, matchers)::
    local all = [m for m in [c.kafkaLsoExporterSelector] + matchers if m != ''];
    if all == [] then '' else '{' + std.join(', ', all) + '}',

  // `text` with every line but the first indented by `spaces`: a multi-line piece of
  // PromQL placed inside another one.
  indent(text, spaces)::
    std.join('\n' + std.repeat(' ', spaces), std.split(std.rstripChars(text, '\n'), '\n')),
}
