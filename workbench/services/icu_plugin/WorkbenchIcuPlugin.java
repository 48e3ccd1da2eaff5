/*
 * A minimal OpenSearch analysis plugin exposing Lucene's ICU analysis under the names the
 * official analysis-icu plugin uses: the "icu_tokenizer" tokenizer (UAX #29 word breaks
 * with dictionary segmentation for Chinese, Thai, Lao, Khmer, Myanmar) and the
 * "icu_folding" token filter (UTR #30 folding: case, diacritics, width), plus the
 * "icu_normalizer" filter (NFKC casefold). The analysis itself is Lucene's
 * (lucene-analysis-icu, ICU4J); this file only registers it.
 *
 * Why it exists: the official org.opensearch.plugin:analysis-icu zip is not published to
 * Maven Central, while Lucene's ICU module and ICU4J are. The workbench compiles this
 * file with javac against the OpenSearch distribution's own jars when it installs its
 * local node (workbench/services/opensearch.py).
 */
package org.workbench.analysis.icu;

import com.ibm.icu.text.Normalizer2;
import java.util.Map;
import org.apache.lucene.analysis.TokenStream;
import org.apache.lucene.analysis.Tokenizer;
import org.apache.lucene.analysis.icu.ICUFoldingFilter;
import org.apache.lucene.analysis.icu.ICUNormalizer2Filter;
import org.apache.lucene.analysis.icu.segmentation.ICUTokenizer;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.index.IndexSettings;
import org.opensearch.index.analysis.AbstractTokenFilterFactory;
import org.opensearch.index.analysis.AbstractTokenizerFactory;
import org.opensearch.index.analysis.NormalizingTokenFilterFactory;
import org.opensearch.index.analysis.TokenFilterFactory;
import org.opensearch.index.analysis.TokenizerFactory;
import org.opensearch.indices.analysis.AnalysisModule.AnalysisProvider;
import org.opensearch.plugins.AnalysisPlugin;
import org.opensearch.plugins.Plugin;

public class WorkbenchIcuPlugin extends Plugin implements AnalysisPlugin {

    @Override
    public Map<String, AnalysisProvider<TokenizerFactory>> getTokenizers() {
        return Map.of("icu_tokenizer", IcuTokenizerFactory::new);
    }

    @Override
    public Map<String, AnalysisProvider<TokenFilterFactory>> getTokenFilters() {
        return Map.of("icu_folding", IcuFoldingFactory::new, "icu_normalizer", IcuNormalizerFactory::new);
    }

    static final class IcuTokenizerFactory extends AbstractTokenizerFactory {
        IcuTokenizerFactory(IndexSettings indexSettings, Environment env, String name, Settings settings) {
            super(indexSettings, settings, name);
        }

        @Override
        public Tokenizer create() {
            return new ICUTokenizer();
        }
    }

    static final class IcuFoldingFactory extends AbstractTokenFilterFactory implements NormalizingTokenFilterFactory {
        IcuFoldingFactory(IndexSettings indexSettings, Environment env, String name, Settings settings) {
            super(indexSettings, name, settings);
        }

        @Override
        public TokenStream create(TokenStream tokenStream) {
            return new ICUFoldingFilter(tokenStream);
        }
    }

    static final class IcuNormalizerFactory extends AbstractTokenFilterFactory implements NormalizingTokenFilterFactory {
        IcuNormalizerFactory(IndexSettings indexSettings, Environment env, String name, Settings settings) {
            super(indexSettings, name, settings);
        }

        @Override
        public TokenStream create(TokenStream tokenStream) {
            return new ICUNormalizer2Filter(tokenStream, Normalizer2.getInstance(null, "nfkc_cf", Normalizer2.Mode.COMPOSE));
        }
    }
}
