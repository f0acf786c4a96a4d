// A Java transactional producer for the integration tests, run by the JDK's source launcher
// on the broker's classpath (the Java client uses transaction version 2, KIP-890, where the
// broker has it; librdkafka uses version 1):
//   scripts/kafka-local tool tests/java/TransactionalProducer.java BOOTSTRAP TRANSACTIONAL_ID [KEY=VALUE...]
// The KEY=VALUE pairs are producer properties. It reads one command a line from its
// standard input and prints "ok" after each, or "error CLASS" when the client threw:
//   init                        initTransactions
//   begin | commit | abort      the transaction calls
//   send TOPIC PARTITION COUNT  COUNT records to one partition, flushed
//   cycle N TOPIC PARTITION     N transactions of one record each, each committed
// It exits when its standard input closes, without closing the producer cleanly.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class TransactionalProducer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("transactional.id", args[1]);
        props.put("linger.ms", "0");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        for (int i = 2; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            props.put(pair[0], pair[1]);
        }
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("ready");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            try {
                switch (words[0]) {
                    case "init" -> producer.initTransactions();
                    case "begin" -> producer.beginTransaction();
                    case "commit" -> producer.commitTransaction();
                    case "abort" -> producer.abortTransaction();
                    case "send" -> send(producer, words[1], Integer.parseInt(words[2]), Integer.parseInt(words[3]));
                    case "cycle" -> {
                        for (int n = 0; n < Integer.parseInt(words[1]); n++) {
                            producer.beginTransaction();
                            send(producer, words[2], Integer.parseInt(words[3]), 1);
                            producer.commitTransaction();
                        }
                    }
                    default -> throw new IllegalArgumentException(words[0]);
                }
                System.out.println("ok");
            } catch (Exception e) {
                System.out.println("error " + e.getClass().getSimpleName());
            }
            System.out.flush();
        }
        System.exit(0);
    }

    private static void send(KafkaProducer<byte[], byte[]> producer, String topic, int partition, int count)
            throws Exception {
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, partition, null, ("record-" + i).getBytes())).get();
        }
    }
}
