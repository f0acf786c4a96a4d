// Pieces of PromQL built from the config: label selectors with the exporter's matchers and
// the dashboards' template variables, and a formatter that fills them into query text.
{
  // Query text helpers of the dashboards for config `c`. Every selector they make starts
  // with the exporter's matchers and, with showMultiCluster, the $cluster variable's. In
  // text passed to fmt():
  //   %(c)s             the Kafka cluster label (kafka_cluster)
  //   %(exporter)s      a selector of only those matchers ('' when there are none)
  //   %(kafkaCluster)s  those and the $kafka_cluster variable
  //   %(topic)s, %(group)s, %(groupTopic)s, %(partition)s, %(groupPartition)s: the same
  //                     with $topic, $group, $partition.
  //   %(andCluster)s    `, cluster="$cluster"` with showMultiCluster, else '': the matcher
  //                     to add to a selector of another job's series (kube-state-metrics').
  new(c):: {
    local multiCluster = if c.showMultiCluster then [c.clusterLabel + '="$cluster"'] else [],
    local kafkaCluster = c.kafkaClusterLabel + '=~"$kafka_cluster"',
    local topic = 'topic=~"$topic"',
    local group = 'group=~"$group"',
    local partition = 'partition=~"$partition"',

    local sel(matchers) = $.selector(c, multiCluster + matchers),

    // `{matchers}` after the exporter's and the $cluster variable's.
    selector(matchers):: sel(matchers),

    vars:: {
      c: c.kafkaClusterLabel,
      exporter: sel([]),
      kafkaCluster: sel([kafkaCluster]),
      topic: sel([kafkaCluster, topic]),
      group: sel([kafkaCluster, group]),
      groupTopic: sel([kafkaCluster, group, topic]),
      partition: sel([kafkaCluster, topic, partition]),
      groupPartition: sel([kafkaCluster, group, topic, partition]),
      andCluster: std.join('', [', ' + m for m in multiCluster]),
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
