// A share group member (KIP-932) for the integration tests, run by the JDK's source
// launcher on the broker's classpath:
//   scripts/kafka-local tool tests/java/ShareMember.java BOOTSTRAP TOPIC GROUP COUNT
// It subscribes, acknowledges the first COUNT records it receives (then no more), prints
// "acknowledged N", and stays in the group until its standard input closes.
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareMember {
    private static volatile boolean stop = false;

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[2]);
        props.put("share.acknowledgement.mode", "explicit");
        props.put("max.poll.records", "1");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        int wanted = Integer.parseInt(args[3]);
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                }
            } catch (Exception e) {
                // closed
            }
            stop = true;
        });
        stdin.setDaemon(true);
        stdin.start();
        int acknowledged = 0;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[1]));
            while (!stop) {
                if (acknowledged < wanted) {
                    for (ConsumerRecord<byte[], byte[]> record : consumer.poll(Duration.ofMillis(200))) {
                        if (acknowledged < wanted) {
                            consumer.acknowledge(record, AcknowledgeType.ACCEPT);
                            acknowledged++;
                        } else {
                            consumer.acknowledge(record, AcknowledgeType.RELEASE);
                        }
                    }
                    consumer.commitSync();
                    if (acknowledged >= wanted) {
                        System.out.println("acknowledged " + acknowledged);
                        System.out.flush();
                    }
                } else {
                    Thread.sleep(200);
                }
            }
        }
        System.out.println("left");
        System.out.flush();
    }
}
