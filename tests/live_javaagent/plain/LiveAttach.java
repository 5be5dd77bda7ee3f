import com.sun.tools.attach.VirtualMachine;

/**
 * Attaches the Java agent named by its arguments (jar, then the agent's argument) to its own JVM,
 * as `jcmd PID JVMTI.agent_load` does from outside, then runs LiveAgentTarget. Needs
 * `-Djdk.attach.allowAttachSelf=true`.
 */
public final class LiveAttach {
    private LiveAttach() {}

    public static void main(String[] args) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(Long.toString(ProcessHandle.current().pid()));
        try {
            vm.loadAgent(args[0], args[1]);
        } finally {
            vm.detach();
        }
        LiveAgentTarget.main(new String[0]);
    }
}
