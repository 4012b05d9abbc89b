package dev.skua.compat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Optional;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * Reports each test as one suite line, {@code PASS id} or {@code FAIL id: reason}, where
 * the id is the test's display name (e.g. {@code java.client.produce_consume.zstd}).
 * Lines go to stdout and are appended to the file named by -Dcompat.results.
 */
public class CaseReporter implements TestWatcher {
    private static boolean headerDone;

    private static synchronized void emit(String line) {
        if (!headerDone) {
            headerDone = true;
            emit("# kafka-clients " + org.apache.kafka.common.utils.AppInfoParser.getVersion());
        }
        System.out.println(line);
        String file = System.getProperty("compat.results");
        if (file == null || file.isEmpty()) return;
        try {
            Files.writeString(Path.of(file), line + "\n", StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    @Override
    public void testSuccessful(ExtensionContext ctx) {
        emit("PASS " + ctx.getDisplayName());
    }

    @Override
    public void testFailed(ExtensionContext ctx, Throwable cause) {
        String msg = cause.getClass().getSimpleName() + ": " + cause.getMessage();
        Throwable root = cause;
        while (root.getCause() != null && root.getCause() != root) root = root.getCause();
        if (root != cause) msg += " (caused by " + root.getClass().getSimpleName() + ": " + root.getMessage() + ")";
        emit("FAIL " + ctx.getDisplayName() + ": " + msg.replace('\n', ' '));
    }

    @Override
    public void testAborted(ExtensionContext ctx, Throwable cause) {
        emit("FAIL " + ctx.getDisplayName() + ": aborted: " + String.valueOf(cause).replace('\n', ' '));
    }

    @Override
    public void testDisabled(ExtensionContext ctx, Optional<String> reason) {
        emit("FAIL " + ctx.getDisplayName() + ": disabled");
    }
}
