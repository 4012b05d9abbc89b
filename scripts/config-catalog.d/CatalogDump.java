// Dumps Apache Kafka's broker and topic config definitions as TSV, for skua's catalog
// (scripts/config-catalog). Run with a Kafka distribution's libs/ on the class path.
import java.lang.reflect.Method;
import java.util.*;
import org.apache.kafka.common.config.ConfigDef;

public class CatalogDump {
    static String esc(String s) {
        if (s == null) return "\\N";
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "");
    }

    static String def(ConfigDef.ConfigKey k) {
        if (!k.hasDefault()) return "\\N";
        if (k.defaultValue == null) return "\\N";
        return esc(ConfigDef.convertToString(k.defaultValue, k.type));
    }

    public static void main(String[] args) throws Exception {
        ConfigDef broker = (ConfigDef) Class.forName("kafka.server.KafkaConfig").getMethod("configDef").invoke(null);
        Object dyn = Class.forName("kafka.server.DynamicBrokerConfig$").getField("MODULE$").get(null);
        Map<String, String> modes = new HashMap<>();
        try {
            Method m = dyn.getClass().getMethod("dynamicConfigUpdateModes");
            @SuppressWarnings("unchecked") Map<String, String> got = (Map<String, String>) m.invoke(dyn);
            modes.putAll(got);
        } catch (NoSuchMethodException e) {
            // older releases: every dynamic config counts as cluster-wide
        }
        Method synonyms = dyn.getClass().getMethod("brokerConfigSynonyms", String.class, boolean.class);
        for (ConfigDef.ConfigKey k : broker.configKeys().values()) {
            if (k.internalConfig) continue;
            Object list = synonyms.invoke(dyn, k.name, false);
            @SuppressWarnings("unchecked")
            List<String> syn = (List<String>) scala.jdk.javaapi.CollectionConverters.asJava((scala.collection.Seq<String>) list);
            String mode = modes.getOrDefault(k.name, "read-only");
            System.out.println(String.join("\t", "broker", k.name, k.type.name(), def(k), mode,
                esc(k.validator == null ? "" : k.validator.toString()), String.join(",", syn), esc(k.documentation)));
        }
        Class<?> logConfig = Class.forName("org.apache.kafka.storage.internals.log.LogConfig");
        ConfigDef topic = (ConfigDef) logConfig.getMethod("configDefCopy").invoke(null);
        Class<?> topicSynonyms = Class.forName("org.apache.kafka.server.config.ServerTopicConfigSynonyms");
        @SuppressWarnings("unchecked")
        Map<String, List<Object>> all = (Map<String, List<Object>>) topicSynonyms.getField("ALL_TOPIC_CONFIG_SYNONYMS").get(null);
        for (ConfigDef.ConfigKey k : topic.configKeys().values()) {
            if (k.internalConfig) continue;
            List<String> syn = new ArrayList<>();
            for (Object s : all.getOrDefault(k.name, Collections.emptyList())) {
                syn.add((String) s.getClass().getMethod("name").invoke(s));
            }
            System.out.println(String.join("\t", "topic", k.name, k.type.name(), def(k), "",
                esc(k.validator == null ? "" : k.validator.toString()), String.join(",", syn), esc(k.documentation)));
        }
    }
}
