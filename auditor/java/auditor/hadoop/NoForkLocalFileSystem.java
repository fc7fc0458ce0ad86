/*
 * Hadoop's local file system, setting permissions through java.nio instead of a child
 * process.
 *
 * Without Hadoop's native library (pyspark ships none), RawLocalFileSystem.setPermission
 * starts `chmod` as a child process for every directory and file a write creates: about
 * 400 process starts per small audit from a JVM of several GB (Spark's job setup, every
 * task's output and checksum file). This class sets the same mode with one system call.
 * It is registered for the "file" scheme only in a local-mode session started by the
 * auditor (auditor.localjar), so a cluster's file systems are untouched.
 */
package auditor.hadoop;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

public class NoForkLocalFileSystem extends LocalFileSystem {
  public NoForkLocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-free) layer, where Hadoop sets permissions. */
  public static class Raw extends RawLocalFileSystem {
    /** Permission bits from the lowest (others' execute) to the ninth (owner's read). */
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      int mode = permission.toShort();
      Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
      for (int i = 0; i < BITS.length; i++) {
        if ((mode & (1 << i)) != 0) {
          set.add(BITS[i]);
        }
      }
      Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
    }
  }
}
