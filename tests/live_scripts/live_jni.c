/* JNI half of LiveJni.java: each native calls straight back into Java. */
#include <jni.h>

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
