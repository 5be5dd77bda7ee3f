/* JNI half of LiveJni.java: each native calls straight back into Java. */
#include <jni.h>
#include <pthread.h>

JNIEXPORT void JNICALL Java_LiveJni_callStatic(JNIEnv *env, jclass cls, jint n) {
    jmethodID m = (*env)->GetStaticMethodID(env, cls, "staticCallback", "(I)V");
    if (m != NULL) (*env)->CallStaticVoidMethod(env, cls, m, n);
}

JNIEXPORT void JNICALL Java_LiveJni_callInstance(JNIEnv *env, jobject self, jint n) {
    jclass cls = (*env)->GetObjectClass(env, self);
    jmethodID m = (*env)->GetMethodID(env, cls, "instanceCallback", "(I)V");
    if (m != NULL) (*env)->CallVoidMethod(env, self, m, n);
}

JNIEXPORT void JNICALL Java_LiveJni_callRunnable(JNIEnv *env, jclass cls, jobject r) {
    jclass rc = (*env)->FindClass(env, "java/lang/Runnable");
    if (rc == NULL) return;
    jmethodID m = (*env)->GetMethodID(env, rc, "run", "()V");
    if (m != NULL) (*env)->CallVoidMethod(env, r, m);
}

JNIEXPORT void JNICALL Java_LiveJni_loadVia(JNIEnv *env, jclass cls, jobject loader, jstring name) {
    if (loader == NULL) return;
    jclass lc = (*env)->FindClass(env, "java/lang/ClassLoader");
    if (lc == NULL) return;
    jmethodID m = (*env)->GetMethodID(env, lc, "loadClass", "(Ljava/lang/String;)Ljava/lang/Class;");
    if (m != NULL) (*env)->CallObjectMethod(env, loader, m, name);
}

/* Threads the JVM did not start: each attaches itself (its java.lang.Thread constructor runs on
 * it, with tid 0 until the constructor sets it), calls back into Java, and detaches. */
struct attached { JavaVM *vm; jclass cls; jmethodID m; jint i; };

static void *attached_main(void *p) {
    struct attached *a = p;
    JNIEnv *env;
    if ((*a->vm)->AttachCurrentThread(a->vm, (void **)&env, NULL) != JNI_OK) return NULL;
    (*env)->CallStaticVoidMethod(env, a->cls, a->m, a->i);
    if ((*env)->ExceptionCheck(env)) (*env)->ExceptionDescribe(env);
    (*a->vm)->DetachCurrentThread(a->vm);
    return NULL;
}

JNIEXPORT void JNICALL Java_LiveJni_attachedThreads(JNIEnv *env, jclass cls, jint n) {
    enum { MAX = 8 };
    pthread_t t[MAX];
    struct attached a[MAX];
    JavaVM *vm;
    jmethodID m = (*env)->GetStaticMethodID(env, cls, "attachedCallback", "(I)V");
    jclass g = (*env)->NewGlobalRef(env, cls);
    if (m == NULL || g == NULL || (*env)->GetJavaVM(env, &vm) != 0) return;
    if (n > MAX) n = MAX;
    for (jint i = 0; i < n; i++) {
        a[i] = (struct attached){ vm, g, m, i };
        if (pthread_create(&t[i], NULL, attached_main, &a[i]) != 0) n = i;
    }
    for (jint i = 0; i < n; i++) pthread_join(t[i], NULL);
    (*env)->DeleteGlobalRef(env, g);
}
