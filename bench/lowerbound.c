/* The latency lower bound for the benchmark: what the least possible daemon
 * does. One PCM kept open and prepared (48 kHz stereo S16_LE, 10 ms buffer,
 * 5 ms period, start at the first period, like cued); one client connection;
 * for each line read, snd_pcm_writei of the preloaded probe, then a reply,
 * then drain + prepare (as cued stops an idle stream).
 *
 *   lowerbound PCM SOCKET_PATH PROBE.raw   (PROBE: S16_LE stereo 48 kHz raw)
 */
#include <alsa/asoundlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static void die(const char *what, int err) {
    fprintf(stderr, "lowerbound: %s: %s\n", what, err ? snd_strerror(err) : strerror(errno));
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: lowerbound PCM SOCKET PROBE.raw\n"); return 64; }
    FILE *f = fopen(argv[3], "rb");
    if (!f) die("probe", 0);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    short *probe = malloc(bytes);
    if (fread(probe, 1, bytes, f) != (size_t)bytes) die("read probe", 0);
    fclose(f);
    snd_pcm_uframes_t frames = bytes / 4;

    snd_pcm_t *pcm;
    int err = snd_pcm_open(&pcm, argv[1], SND_PCM_STREAM_PLAYBACK, 0);
    if (err < 0) die("snd_pcm_open", err);
    err = snd_pcm_set_params(pcm, SND_PCM_FORMAT_S16_LE, SND_PCM_ACCESS_RW_INTERLEAVED, 2, 48000, 1, 10000);
    if (err < 0) die("snd_pcm_set_params", err);
    snd_pcm_sw_params_t *sw;
    snd_pcm_sw_params_malloc(&sw);
    snd_pcm_sw_params_current(pcm, sw);
    snd_pcm_uframes_t period, buffer;
    snd_pcm_get_params(pcm, &buffer, &period);
    snd_pcm_sw_params_set_start_threshold(pcm, sw, period);
    snd_pcm_sw_params(pcm, sw);
    snd_pcm_sw_params_free(sw);
    snd_pcm_prepare(pcm);

    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    strncpy(addr.sun_path, argv[2], sizeof addr.sun_path - 1);
    unlink(argv[2]);
    if (bind(s, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(s, 4) < 0) die("bind", 0);
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        char buf[512];
        ssize_t n;
        while ((n = read(c, buf, sizeof buf)) > 0) {
            for (ssize_t i = 0; i < n; i++) {
                if (buf[i] != '\n') continue;
                snd_pcm_sframes_t w = snd_pcm_writei(pcm, probe, frames);
                if (w < 0) snd_pcm_recover(pcm, (int)w, 1);
                (void)!write(c, "ok\n", 3);
                snd_pcm_drain(pcm);
                snd_pcm_prepare(pcm);
            }
        }
        close(c);
    }
}
